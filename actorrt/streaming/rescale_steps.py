"""The operator's tasks in a rescale (``rescaling.py`` has the protocol): a producer switches its
routing, a stage instance hands keys over and adopts them, a consumer gains or retires channels.
Each is a task of the operator actor, so it is in its lineage: a replay does it at the same point
of the operator's input as the first run did.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import actorrt
from actorrt.handles import ActorHandle
from actorrt.streaming.key_state import KeySlice, give_keys, take_keys
from actorrt.streaming.keys import partition
from actorrt.streaming.progress import UNKNOWN, InputProgress
from actorrt.streaming.rescaling import HANDOFF_KEYS, Handoff, Held, hands_to

if TYPE_CHECKING:
    from actorrt.streaming.operator import Operator


class RescaleSteps:
    """What ``Operator`` does in a rescale (a mixin: it reads and writes the operator's state)."""

    # --- a producer of the stage ---

    async def reroute(self: Operator, stage: int, handles: list[ActorHandle]) -> None:
        """Send records for ``stage`` to ``handles`` (its instances from now on) by the new
        routing, and tell each old instance so after the last record routed the old way."""
        self.plan.stages[stage].parallelism = len(handles)
        for p, port in enumerate(self.routes):
            for r, route in enumerate(port):
                if route.stage != stage:
                    continue
                old = route.handles
                queues = self._in_flight[p][r]
                route.handles = list(handles)
                fanout = route.fanout
                fanout.consumers = len(handles)
                fanout.told = (fanout.told + [(UNKNOWN, False)] * len(handles))[:len(handles)]
                for i, handle in enumerate(old):
                    queues[i].append(handle.handover.remote(route.channel))
                self._retiring_refs += [q for q in queues[len(handles):]]
                self._in_flight[p][r] = (queues + [deque() for _ in handles])[:len(handles)]
                if self.ended:  # the new instances hear of the end as the old ones did
                    for handle in handles[len(old):]:
                        await handle.finish.remote(route.channel)

    # --- an instance of the stage ---

    def begin_rescale(self: Operator, old: int, new: int, peers: list[ActorHandle], me: ActorHandle) -> None:
        """A move from ``old`` to ``new`` instances begins; ``peers``: the stage's new instances;
        ``me``: this instance's handle (it sends its keys in pieces, a task each)."""
        self.handoff = Handoff(self.instance, old, new)
        self.peers = list(peers)
        self.me_rescaling = me

    async def handover(self: Operator, upstream: int) -> None:
        """Producer channel ``upstream`` switched: after the last, the leaving keys are taken out,
        to go in pieces."""
        handoff = self.handoff
        handoff.handovers += 1
        if handoff.handovers < self.logic.upstreams - self.retired:
            return
        handoff.mark = self.logic.progress.mark if self.logic.progress is not None else None
        for j in hands_to(self.instance, handoff.old, handoff.new):
            # (past the end of its input, what it held was emitted: nothing more is to come for it)
            part = KeySlice() if self.ended else take_keys(self.logic, lambda k, j=j: partition(k, handoff.new) == j,
                                                           self.uid)
            pieces = part.chunks(HANDOFF_KEYS)
            handoff.outgoing += [(j, piece, n == len(pieces) - 1) for n, piece in enumerate(pieces)]
        await self.send_keys()

    async def send_keys(self: Operator) -> None:
        """One piece of the keys this instance hands over; the next goes in a task of its own, so
        that the records of the keys it keeps go through between pieces (each is pickled here)."""
        handoff = self.handoff
        if handoff.outgoing:
            j, piece, last = handoff.outgoing.pop(0)
            # Not awaited: two kept instances may hand keys to each other (awaited by a retirement).
            self._handed.append(self.peers[j].adopt.remote(self.instance, piece, handoff.mark, last))
        if handoff.outgoing:
            self.me_rescaling.send_keys.remote()
            return
        handoff.handed = True
        if handoff.retiring:
            await self._retire()
        await self._end_handoff()

    async def adopt(self: Operator, owner: int, part: KeySlice, mark: float | None, last: bool = True) -> None:
        """A piece of old instance ``owner``'s keys that come here, with its watermark: after the
        last, the records held for them go through, in the order they came."""
        give_keys(self.logic, part)
        if not last:
            return
        progress = self.logic.progress
        if progress is not None and mark is not None and not self.handoff.old_instance:
            progress.mark = max(progress.mark, mark)  # (a new instance: its inputs' marks come later)
        now = actorrt.now()
        self._start_clock(now)
        for held in self.handoff.arrived(owner):
            await self._process_held(held)
        await self._emit(self._run(self.logic.close, now), now)  # what it took may be due already
        await self._end_handoff()

    def rescaled(self: Operator) -> bool:
        """Whether this instance's part of the move is over."""
        return self.handoff is None

    async def _process_held(self: Operator, held: Held) -> None:
        # In processing time as arriving now: the window it came in may have closed at its old owner.
        now = actorrt.now() if self.plan.time is None else held.now
        outs = self._run(self.logic.process, held.records, now, held.upstream, held.times, None, False, held.seqs)
        await self._emit(outs, held.born, None, self.logic.sender_code(held.upstream), held.seqs)

    async def _end_handoff(self: Operator) -> None:
        """Once every part came: the deferred watermark moves, and (a new instance) its
        watermark to its consumers."""
        handoff = self.handoff
        if handoff is None or not handoff.done:
            return
        self.handoff = None
        now = actorrt.now()
        for upstream, mark, idle in handoff.deferred:
            await self._emit(self._run(self.logic.advance, upstream, mark, idle, now), now)
        if not handoff.old_instance and self.logic.progress is not None:
            await self._emit(self._run(self.logic.close, self.logic.progress.mark), now)
        for upstream in handoff.finishes:
            await self.finish(upstream)

    async def _retire(self: Operator) -> None:
        """An instance beyond the new parallelism: once what it sent is processed, its consumers
        count its channel as finished."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        await self._settle()
        for port in self.routes:
            for route in port:
                for handle in route.handles:
                    await handle.retire_channel.remote(route.channel, self.ended)

    # --- a consumer of the stage ---

    def add_channel(self: Operator, input_index: int) -> int:
        """A new instance of the stage of input ``input_index`` sends here: its channel number
        (appended: no channel is ever renumbered)."""
        put = self.plan.stages[self.stage].inputs[input_index]
        self.logic.channels.append(put)
        progress = self.logic.progress
        if isinstance(progress, InputProgress):
            progress.inputs += 1
            progress.marks.append(UNKNOWN)
            progress.idle_inputs.append(False)
        return len(self.logic.channels) - 1

    async def retire_channel(self: Operator, channel: int, ended: bool) -> None:
        """Channel ``channel``'s sender retired: it no longer holds the watermark back, and counts
        as finished (``ended``: it had passed its end on already, which counted)."""
        self.retired += 1
        if not ended:
            self.finished += 1
            await self._end_if_last(channel)

    def _defers(self: Operator, upstream: int, mark: float | None, idle: bool) -> bool:
        """Whether a watermark move waits for the end of this instance's part of a move (held
        records must not be late; the moves are applied in their order)."""
        if self.handoff is None or mark is None:
            return False
        self.handoff.deferred.append((upstream, mark, idle))
        return True

    def _hold(self: Operator, batch: list[Any], upstream: int, times: list[int] | None, seqs: Any, now: float,
              born: float) -> tuple[list[Any], list[int] | None, Any]:
        """The part of ``batch`` to process now; the rest waits for its keys' state."""
        handoff = self.handoff
        if handoff is None or not handoff.awaiting or self.logic.stage.keyed is None:
            return batch, times, seqs
        ready, held = handoff.split(batch, self.logic.channels[upstream].key, times, seqs, upstream, now, born)
        if not held:
            return batch, times, seqs
        handoff.held += held
        return ([batch[p] for p in ready], None if times is None else [times[p] for p in ready],
                [seqs[p] for p in ready] if seqs else seqs)
