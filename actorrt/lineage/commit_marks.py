"""Commit watermarks: how far each channel's tasks are committed, as their receiver knows it.

A process that holds forwarded lineage learns that a spec is committed from its own write's ack,
a store round trip after it stashed the spec; meanwhile it forwards the spec again with each task
it sends. A token in a ring outruns that knowledge at every hop, so it carried its whole last lap
(N - 1 specs on N nodes) and every holder wrote them all. The receiver of a task knows first that
it is committed: it wrote it. So it announces, per channel (sender -> receiver), the counter up to
which every task ran and is committed at its final version, to every process at once; a holder
then drops those specs, and the writes of them it has queued, without a round trip of its own.
The lineage carried per hop is then bounded by the store's latency over a hop's, not by the ring.

A task's version changes only at its receiver, while it waits and while it runs (its execution
order, ``actorrt.record``): once it ran and that version is committed, no holder can have a newer
one. Tasks of a channel run in counter order, and a replayed task runs as the store has it (unless
its log runs out and it records afresh: that new version must be committed first), so a prefix
that ran and is committed is all committed. Pure bookkeeping, no I/O.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from actorrt.lineage.stash import Channel

Mark = tuple[bytes, bytes, int]  # (receiver, sender, counter): every task up to counter is committed


class CommitMarks:
    """The tasks that ran here, per channel, until their final versions are committed."""

    def __init__(self, committed_version: Callable[[bytes], int]) -> None:
        self._committed_version = committed_version  # of a task id (-1: not known committed)
        self._ran: dict[Channel, deque[tuple[int, bytes, int]]] = {}  # (counter, task id, final version)
        self.marks: dict[Channel, int] = {}  # announced

    def ran(self, channel: Channel, counter: int, task_id: bytes, version: int) -> None:
        """A task ran here at its final ``version`` (-1: a replayed task, committed already)."""
        self._ran.setdefault(channel, deque()).append((counter, task_id, version))

    def advance(self) -> list[Mark]:
        """The channels whose committed prefix grew, with their new marks."""
        out: list[Mark] = []
        for channel in list(self._ran):
            ran = self._ran[channel]
            upto = 0
            while ran and self._committed_version(ran[0][1]) >= ran[0][2]:
                upto = ran.popleft()[0]
            if not ran:
                del self._ran[channel]
            if upto > self.marks.get(channel, 0):
                self.marks[channel] = upto
                out.append((channel[0], channel[1], upto))
        return out

    def covers(self, channel: Channel, counter: int) -> bool:
        return counter <= self.marks.get(channel, 0)
