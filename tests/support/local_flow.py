"""A dataflow run in one process, for tests of its logic: every operator instance's ``StageLogic``
and ``Fanout``, as the operators hold them, with the messages between instances delivered in a
seeded random order. Each channel (one instance to one instance) is first in, first out, as the
runtime's streams are; which channel goes next is random, so inputs drift apart as far as they
can. No actors, no sockets: thousands of schedules run in the time one cluster starts.

A plan with ``lineage`` set captures record lineage as operators do: ``writes`` holds what the
instances would write to the lineage store, ``ids`` the IDs of the collected records.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from actorrt.lineage.records import SOURCE, RecordId
from actorrt.store.relations import InstanceWrites, instance_prefix
from actorrt.streaming.fanout import Advance, Batch, Fanout, fanout_to
from actorrt.streaming.logic import DeadLetter, Out, StageLogic
from actorrt.streaming.plan import Consumer, Plan
from actorrt.streaming.provenance import Capture

DRIVER = -1


@dataclass
class _Finish:
    pass


@dataclass
class LocalResult:
    collected: dict[str, list[Any]] = field(default_factory=dict)  # by the name collect() gave
    late: list[Any] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    messages: int = 0  # delivered between instances (records and watermarks)
    advances: int = 0  # of which watermarks alone
    ids: dict[str, list[RecordId]] = field(default_factory=dict)  # capturing lineage: the collected records'
    writes: list[InstanceWrites] = field(default_factory=list)  # capturing lineage: what the store gets

    @property
    def outputs(self) -> list[Any]:
        """What the streams collected without a name emitted."""
        return self.collected.get("outputs", [])


class LocalFlow:
    """``plan``'s instances in this process; ``feed`` records, ``deliver`` messages, ``finish``."""

    def __init__(self, plan: Plan, seed: int) -> None:
        self.plan = plan
        self.rng = random.Random(seed)
        self.logic = [[StageLogic.of(plan, s) for _ in range(stage.parallelism)] for s, stage in enumerate(plan.stages)]
        # Per stage, instance and port: each consumer with this instance's fanout to it.
        self.fanout: list[list[list[list[tuple[Consumer, Fanout]]]]] = [
            [[[(c, fanout_to(plan, s, c)) for c in consumers] for consumers in plan.consumers(s)]
             for _ in range(stage.parallelism)]
            for s, stage in enumerate(plan.stages)]
        # (stage, instance) -> {channel: deque of messages}; the driver sends to a source as DRIVER.
        self.channels: dict[tuple[int, int], dict[int, deque]] = {}
        self.finished: dict[tuple[int, int], int] = {}
        self.result = LocalResult()
        self._turn: dict[int, int] = {}
        self._rows: dict[int, int] = {}  # per source: the records fed so far (their IDs)
        self.capture = [[Capture(instance_prefix(plan.lineage, s, i), plan.lineage_keep, relates=plan.captures(s))
                         if plan.numbers(s) else None for i in range(stage.parallelism)]
                        for s, stage in enumerate(plan.stages)]
        for s, instances in enumerate(self.logic):
            for logic in instances:
                logic.capture = plan.captures(s)

    def feed(self, records: list[Any], now: float = 0.0, source: int | None = None) -> None:
        """The driver's batches, in turn over a source's instances (as ``RunningFlow.feed`` sends
        them); ``source``: its stage (the first source if None)."""
        s = self.plan.sources[0] if source is None else source
        instances = self.plan.stages[s].parallelism
        for i in range(0, len(records), self.plan.batch_size):
            to = self._turn.get(s, 0) % instances
            self._turn[s] = self._turn.get(s, 0) + 1
            batch = records[i:i + self.plan.batch_size]
            row = self._rows.get(s, 0)
            self._rows[s] = row + len(batch)
            self._queue(s, to, DRIVER, (batch, now, range(row, row + len(batch))))

    def tick(self, now: float) -> None:
        """The clock of every instance (timers: idleness, processing-time windows), now."""
        for s, instances in enumerate(self.logic):
            for i, logic in enumerate(instances):
                self._emit(s, i, logic.tick(now))

    def deliver(self, now: float = 0.0, limit: int | None = None) -> None:
        """Deliver queued messages, one channel's head at a time, picked at random, until none is
        left (or ``limit`` were)."""
        delivered = 0
        while limit is None or delivered < limit:
            ready = [(target, sender) for target, inputs in self.channels.items()
                     for sender, queue in inputs.items() if queue]
            if not ready:
                return
            (s, i), sender = self.rng.choice(sorted(ready))
            self._handle(s, i, sender, self.channels[(s, i)][sender].popleft(), now)
            delivered += 1

    def finish(self, now: float = 0.0) -> LocalResult:
        """The end of the input, passed down the stages; delivers everything; the result."""
        for s in self.plan.sources:
            for i in range(self.plan.stages[s].parallelism):
                self._queue(s, i, DRIVER, _Finish())
        self.deliver(now)
        for instances in self.logic:
            for logic in instances:
                self.result.late += logic.late
                self.result.dead_letters += logic.dead_letters
        return self.result

    def _queue(self, s: int, i: int, sender: int, message: Any) -> None:
        self.channels.setdefault((s, i), {}).setdefault(sender, deque()).append(message)

    def _handle(self, s: int, i: int, sender: int, message: Any, now: float) -> None:
        logic = self.logic[s][i]
        self.result.messages += 1
        if isinstance(message, _Finish):
            self.finished[(s, i)] = self.finished.get((s, i), 0) + 1
            out = logic.upstream_done(max(sender, 0), now)
            if self.finished[(s, i)] < logic.upstreams:
                self._emit(s, i, out)
                return
            self._emit(s, i, [mine.then(last) for mine, last in zip(out, logic.finish(), strict=True)])
            for port in self.fanout[s][i]:
                for consumer, _ in port:
                    for j in range(self.plan.stages[consumer.stage].parallelism):
                        self._queue(consumer.stage, j, consumer.base + i, _Finish())
        elif isinstance(message, Batch):
            seqs = message.seqs or ()
            self._emit(s, i, logic.process(message.records, now, sender, message.times, message.mark, message.idle,
                                           seqs), logic.sender_code(sender), seqs)
        elif isinstance(message, Advance):
            self.result.advances += 1
            self._emit(s, i, logic.advance(sender, message.mark, message.idle, now))
        else:  # the driver's batch
            records, fed_at, *rows = message  # (a test may queue a batch without IDs)
            rows = rows[0] if rows else ()
            self._emit(s, i, logic.process(records, fed_at, 0, seqs=rows), SOURCE, rows)

    def _emit(self, s: int, i: int, outs: list[Out], code: int = SOURCE, in_seqs: Any = ()) -> None:
        logic = self.logic[s][i]
        numbers: list[Any] = [None] * len(outs)
        capture = self.capture[s][i]
        if capture is not None:
            numbers, writes = capture.relate(code, in_seqs, outs, logic.history.take())
            if writes is not None:
                self.result.writes.append(writes)
        for p, (port, out, consumers) in enumerate(zip(self.plan.stages[s].ports, outs, self.fanout[s][i],
                                                       strict=True)):
            if port.collect is not None:
                self.result.collected.setdefault(port.collect, []).extend(out.records)
                if numbers[p] is not None:
                    self.result.ids.setdefault(port.collect, []).extend(
                        RecordId(self.plan.lineage, s, i, q) for q in numbers[p])
            for consumer, fanout in consumers:
                for message in fanout.messages(out, logic.watermark_out, logic.dead_letters, numbers[p]):
                    self._queue(consumer.stage, message.to, consumer.base + i, message)
