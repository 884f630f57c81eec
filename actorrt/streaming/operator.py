"""An operator instance: one long-running actor running one stage of a dataflow.

It takes batches (``process``), emits what its stage makes to the next stage's instances (by key,
or in turn), and never has more than ``max_in_flight`` batches unprocessed at any of them: past
that it awaits the oldest, so a slow consumer slows its producers instead of queueing without end.
Windowed stages close windows on time with a timer (``actorrt.call_every``), records or not. The
clock is read through ``actorrt.now()``, so a replay sees the times the lost run saw.
"""

from __future__ import annotations

import zlib
from collections import deque
from typing import Any

import actorrt
from actorrt.core.object_ref import ObjectRef
from actorrt.handles import ActorHandle
from actorrt.streaming.logic import StageLogic
from actorrt.streaming.plan import Plan
from actorrt.util import pickling


def partition(key: Any, parts: int) -> int:
    """The instance a key goes to: a hash that is the same in every process (Python's ``hash`` of
    a string is salted per process)."""
    return zlib.crc32(repr(key).encode()) % parts


class Operator:
    def __init__(self, plan_blob: bytes, stage: int, instance: int, downstream: list[ActorHandle],
                 upstreams: int) -> None:
        self.plan: Plan = pickling.loads(plan_blob)
        self.stage, self.instance = stage, instance
        self.logic = StageLogic(self.plan.stages[stage])
        self.downstream = downstream
        self.next_stage = self.plan.stages[stage + 1] if downstream else None
        self.upstreams = upstreams
        self.finished = 0
        self.outputs: list[Any] = []  # the last stage's records
        self.turn = 0  # round robin over the next stage, where it is not keyed
        self.records_in = self.records_out = 0
        self.timer: actorrt.Timer | None = None
        self._in_flight: list[deque[ObjectRef]] = [deque() for _ in downstream]

    async def process(self, batch: list[Any]) -> None:
        self.records_in += len(batch)
        keyed = self.logic.keyed
        if keyed is not None and keyed.kind == "window" and self.timer is None:
            tick = keyed.window.tick_s  # at window boundaries (the first one aligned)
            self.timer = actorrt.call_every(tick, self.tick, first_in=tick - actorrt.now() % tick)
        await self._emit(self.logic.process(batch, actorrt.now()))

    async def tick(self) -> None:
        await self._emit(self.logic.close(actorrt.now()))

    async def finish(self) -> None:
        """One upstream instance is done; after the last, flush and pass the end on."""
        self.finished += 1
        if self.finished < self.upstreams:
            return
        if self.timer is not None:
            self.timer.cancel()
        await self._emit(self.logic.finish())
        for queue in self._in_flight:
            while queue:
                await queue.popleft()
        for handle in self.downstream:
            await handle.finish.remote()

    def results(self) -> tuple[list[Any], list[Any], list[Any], dict[str, int]]:
        """The last stage's records, the records put aside, late records, and record counts."""
        return self.outputs, self.logic.dead_letters, self.logic.late, {"in": self.records_in, "out": self.records_out}

    async def _emit(self, records: list[Any]) -> None:
        self.records_out += len(records)
        if not self.downstream:
            self.outputs.extend(records)
            return
        parts: list[list[Any]] = [[] for _ in self.downstream]
        key = self.next_stage.key
        for record in records:
            if key is not None:
                parts[partition(key(record), len(parts))].append(record)
            else:
                parts[self.turn % len(parts)].append(record)
                self.turn += 1
        for i, part in enumerate(parts):
            if part:
                await self._send(i, part)

    async def _send(self, i: int, batch: list[Any]) -> None:
        queue = self._in_flight[i]
        queue.append(self.downstream[i].process.remote(batch))
        while len(queue) > self.plan.max_in_flight:
            await queue.popleft()  # back-pressure: the consumer is behind

    def checkpoint(self) -> dict[str, Any]:
        # In-flight refs are not state: what they wait for was sent, and is re-sent if need be.
        return {k: v for k, v in self.__dict__.items() if k != "_in_flight"}

    def restore(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._in_flight = [deque() for _ in self.downstream]
