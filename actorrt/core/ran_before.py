"""What surviving receivers ran before a failure, of the senders a recovery rebuilds.

The survivors say it when they flush their stashes for the recovery (per receiver and sender:
the last task counter it ran, and the digests of the calls it keeps). A replayed call that its
receiver ran is not sent again unless its result is asked for (the receiver then answers from its
ledger); a call whose digest differs from the one that ran is sent, and its receiver stops the
diverged replay. Kept only while recoveries are under way.
"""

from __future__ import annotations

from actorrt.core.task_spec import call_digest
from actorrt.rpc import common_pb2 as pb
from actorrt.rpc import node_pb2


class RanBefore:
    def __init__(self) -> None:
        # (receiver, sender) -> the last task counter it ran, and the digests of the calls it keeps
        self._ran: dict[tuple[bytes, bytes], tuple[int, dict[int, bytes]]] = {}

    def note(self, ran: list[node_pb2.RanFrom]) -> None:
        for r in ran:
            digests = {c: r.digests[8 * i:8 * i + 8] for i, c in enumerate(r.counters)}
            self._ran[(r.receiver, r.sender)] = (r.counter, digests)

    def covers(self, spec: pb.TaskSpec) -> bool:
        """Whether ``spec``'s receiver ran this very call before the failure."""
        if not spec.receiver or spec.function or spec.HasField("actor_creation"):
            return False
        last, digests = self._ran.get((spec.receiver, spec.sender), (0, {}))
        if spec.task_counter > last:
            return False
        ran = digests.get(spec.task_counter)
        return ran is None or ran == call_digest(spec)

    def clear(self) -> None:
        """Every recovery here is over: no replay asks any more."""
        self._ran.clear()
