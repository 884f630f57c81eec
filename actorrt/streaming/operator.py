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
from actorrt.streaming.logic import RecordError, StageLogic
from actorrt.streaming.plan import Plan
from actorrt.util import pickling

# A source with nothing new is asked again this often.
PULL_IDLE_S = 0.01


class Monitor:
    """A flow's failures, as operators report them: the driver asks while it runs the flow."""

    def __init__(self) -> None:
        self.failures: list[str] = []

    def failed(self, message: str) -> None:
        self.failures.append(message)

    def first_failure(self) -> str | None:
        return self.failures[0] if self.failures else None


def partition(key: Any, parts: int) -> int:
    """The instance a key goes to: a hash that is the same in every process (Python's ``hash`` of
    a string is salted per process)."""
    return zlib.crc32(repr(key).encode()) % parts


class Operator:
    def __init__(self, plan_blob: bytes, stage: int, instance: int, downstream: list[ActorHandle],
                 upstreams: int, monitor: ActorHandle) -> None:
        self.plan: Plan = pickling.loads(plan_blob)
        self.stage, self.instance = stage, instance
        self.logic = StageLogic(self.plan.stages[stage], upstreams=upstreams)
        self.downstream = downstream
        self.next_stage = self.plan.stages[stage + 1] if downstream else None
        self.upstreams = upstreams
        self.monitor = monitor
        self.finished = 0
        self.outputs: list[Any] = []  # the last stage's records
        self.turn = 0  # round robin over the next stage, where it is not keyed
        self.records_in = self.records_out = 0
        self.timer: actorrt.Timer | None = None
        self.position: Any = None  # how far a pulled source was read
        self.done = False
        self.sink_writes = 0
        self._in_flight: list[deque[ObjectRef]] = [deque() for _ in downstream]

    async def process(self, batch: list[Any], upstream: int = 0) -> None:
        self.records_in += len(batch)
        keyed = self.logic.keyed
        if keyed is not None and keyed.kind == "window" and self.timer is None:
            tick = keyed.window.tick_s  # at window boundaries (the first one aligned)
            self.timer = actorrt.call_every(tick, self.tick, first_in=tick - actorrt.now() % tick)
        await self._emit(self._run(self.logic.process, batch, actorrt.now(), upstream))

    def start(self) -> None:
        """Pull from the flow's source (the first stage's only instance)."""
        actorrt.call_later(0, self.pull)

    async def pull(self) -> None:
        """One batch of the source: the range found is recorded (a replay reads the same range),
        then the next pull is a task of its own, so nothing holds the mailbox for long."""
        source = self.plan.pulled
        found = actorrt.record(source.next_range, self.position, self.plan.batch_size)
        if found is None:
            if source.ended(self.position):
                await self.finish(0)
                self.done = True
            else:
                actorrt.call_later(PULL_IDLE_S, self.pull)
            return
        batch = source.read(found)
        self.position = found[1]
        await self.process(batch)
        actorrt.call_later(0, self.pull)

    def finished_all(self) -> bool:
        return self.done

    async def tick(self) -> None:
        await self._emit(self._run(self.logic.close, actorrt.now()))

    def _run(self, step: Any, *args: Any) -> list[Any]:
        """``step(*args)`` of the stage's logic; a record it fails on is told to the flow's monitor
        at once (the driver stops the run), then raised to whoever sent the batch."""
        try:
            return step(*args)
        except RecordError as exc:
            self.monitor.failed.remote(str(exc))
            raise

    async def finish(self, upstream: int = 0) -> None:
        """Upstream instance ``upstream`` is done; after the last, flush and pass the end on."""
        self.finished += 1
        self.logic.upstream_done(upstream)
        if self.finished < self.upstreams:  # it no longer holds the watermark back
            await self._emit(self._run(self.logic.close, actorrt.now()))
            return
        if self.timer is not None:
            self.timer.cancel()
        await self._emit(self._run(self.logic.finish))
        for queue in self._in_flight:
            while queue:
                await queue.popleft()
        for handle in self.downstream:
            await handle.finish.remote(self.instance)

    def results(self) -> tuple[list[Any], list[Any], list[Any], dict[str, int]]:
        """The last stage's records, the records put aside, late records, and record counts."""
        return self.outputs, self.logic.dead_letters, self.logic.late, {"in": self.records_in, "out": self.records_out}

    async def _emit(self, records: list[Any]) -> None:
        self.records_out += len(records)
        if not self.downstream:
            if self.plan.sink is None:
                self.outputs.extend(records)
            elif records:
                await actorrt.commit_lineage()  # a replay then writes the same records as this write
                self.sink_writes += 1
                self.plan.sink.write(f"{self.plan.name}/{self.stage}/{self.instance}", self.sink_writes, records)
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
        queue.append(self.downstream[i].process.remote(batch, self.instance))
        while len(queue) > self.plan.max_in_flight:
            await queue.popleft()  # back-pressure: the consumer is behind

    def checkpoint(self) -> dict[str, Any]:
        # In-flight refs are not state: what they wait for was sent, and is re-sent if need be.
        return {k: v for k, v in self.__dict__.items() if k != "_in_flight"}

    def restore(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._in_flight = [deque() for _ in self.downstream]
