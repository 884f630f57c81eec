"""Per channel (sender, receiving actor), the counter up to which every call has its answer here.

A sender that is never replayed (a driver, or any sender where lineage is not logged) re-sends
only calls it has no result for. It tells the receiver this watermark with each call
(``TaskSpec.answered_upto``), and the receiver's ledger lets go of the results it kept for
re-sends up to it: a driver's large results are held as long as the driver may ask again, not for
the next sixteen calls.

Results mostly come back in counter order; one that comes early waits in ``_above`` until the
calls before it are answered.
"""

from __future__ import annotations

from actorrt.rpc import common_pb2 as pb

Channel = tuple[bytes, bytes]  # (sender, receiving actor)


class AnsweredCalls:
    def __init__(self) -> None:
        self._upto: dict[Channel, int] = {}
        self._above: dict[Channel, set[int]] = {}  # answered counters past a gap

    def answered(self, spec: pb.TaskSpec) -> None:
        """``spec``'s result (or its failure) reached this process: it is never sent again."""
        channel = (spec.sender, spec.receiver)
        upto, counter = self._upto.get(channel, 0), spec.task_counter
        if counter != upto + 1:
            if counter > upto:
                self._above.setdefault(channel, set()).add(counter)
            return
        upto = counter
        above = self._above.get(channel)
        while above and upto + 1 in above:
            upto += 1
            above.remove(upto)
        if above is not None and not above:
            del self._above[channel]
        self._upto[channel] = upto

    def upto(self, sender: bytes, receiver: bytes) -> int:
        return self._upto.get((sender, receiver), 0)
