"""An operator instance: one long-running actor running one stage of a dataflow.

It takes batches (``process``), emits what each port of its stage makes to the instances of the
stages that take it (by key, or in turn), and never has more than ``max_in_flight`` batches
unprocessed at any of them: past that it awaits the oldest, so a slow consumer slows its producers
instead of queueing without end. A stage that acts on processing time (windows, timers, a
time-to-live) looks at the clock with a timer (``actorrt.call_every``), records or not. The clock
is read through ``actorrt.now()``, so a replay sees the times the lost run saw.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import actorrt
from actorrt.core.held_outputs import held_here, waiting_behind
from actorrt.core.object_ref import ObjectRef
from actorrt.core.record_lineage import relation_queue
from actorrt.exceptions import ActorRTError
from actorrt.handles import ActorHandle
from actorrt.lineage.records import SOURCE
from actorrt.store.relations import instance_prefix
from actorrt.streaming.connectors import read_with_ids
from actorrt.streaming.digests import digest
from actorrt.streaming.fanout import Batch, Fanout, fanout_to
from actorrt.streaming.key_state import give_keys, take_keys
from actorrt.streaming.logic import OperatorStoppedError, Out, RecordError, StageLogic
from actorrt.streaming.operator_metrics import OperatorMetrics
from actorrt.streaming.plan import Plan, pulled, tick_s
from actorrt.streaming.progress import InputProgress, SourceProgress
from actorrt.streaming.provenance import Capture
from actorrt.streaming.rescale_steps import RescaleSteps
from actorrt.streaming.rescaling import Handoff, Joining
from actorrt.util import pickling

# A source with nothing new is asked again this often (unless it has a ``poll_s`` of its own).
PULL_IDLE_S = 0.01
# What a pulled source's partial batch (fewer records than batch_size) may leave unprocessed at a
# consumer, at most. A pull takes what is there, so a busy flow would otherwise fill every window
# with small batches and each record would queue behind them; waiting sooner, the next pull finds
# more records and sends them as one batch (a full batch may have ``max_in_flight``).
PARTIAL_IN_FLIGHT = 2
# A source instance with event time and ``idle_s`` looks at the clock this many times per idle_s
# (how soon it sees it is idle, and how smoothly its watermark then moves on), at most every 50 ms.
IDLE_TICKS = 4
IDLE_TICK_MIN_S = 0.05


class Monitor:
    """A flow's failures, as operators report them: the driver asks while it runs the flow."""

    # "No failure yet" (None) is an acknowledgement: the driver's poll depends on nothing in it,
    # so a rollback of the monitor need not take the driver back (``ft="checkpoint"``).
    __actorrt_acks__ = ("first_failure",)

    def __init__(self) -> None:
        self.failures: list[ActorRTError] = []

    def failed(self, message: str) -> None:
        """An operator raised on a record."""
        self.failures.append(RecordError(message))

    def stopped(self, message: str) -> None:
        """The runtime stopped an operator (its replay diverged)."""
        self.failures.append(OperatorStoppedError(message))

    def first_failure(self) -> ActorRTError | None:
        return self.failures[0] if self.failures else None


@dataclass
class _Route:
    """Where one port's records go: the instances of a stage that takes them, with this
    instance's channel there and its fanout (which instance gets what)."""

    handles: list[ActorHandle]
    channel: int
    fanout: Fanout
    stage: int  # the stage that takes them


class Operator(RescaleSteps):
    # What a producer's calls of these return says only that the batch ran (records that fail go
    # to the monitor), and a source's None from ``finished_all`` only that it has not finished: a
    # checkpointing operator answers them at once (``ActorInstance._send_or_hold``), and their
    # callers depend on nothing in them (the rollback frontier, ``ft="checkpoint"``).
    __actorrt_acks__ = ("process", "advance", "finished_all")

    def __init__(self, plan_blob: bytes, stage: int, instance: int, downstream: list[list[list[ActorHandle]]],
                 monitor: ActorHandle, joining: Joining | None = None) -> None:
        """Instance ``instance`` of the plan's stage ``stage``; ``downstream``: per port of the
        stage, the instances of each stage that takes it (``Plan.consumers``' order); ``joining``:
        an instance a rescale adds (``rescaling.Joining``)."""
        self.plan: Plan = pickling.loads(plan_blob)
        self.stage, self.instance = stage, instance  # (its place among the stage's instances now)
        # Its own name in the stage for its whole life, for record IDs and sink writers: a rescale
        # that adds an instance where one was retired gives it a new one.
        self.uid = instance if joining is None else joining.uid
        self.logic = StageLogic.of(self.plan, stage, None if joining is None else joining.inputs)
        # Per port, per stage that takes it: its instances, this instance's channel there, the fanout.
        self.routes = [[_Route(handles, consumer.base + instance if joining is None else joining.channels[p][c],
                               fanout_to(self.plan, stage, consumer), consumer.stage)
                        for c, (handles, consumer) in enumerate(zip(port, consumers, strict=True))]
                       for p, (port, consumers) in enumerate(zip(downstream, self.plan.consumers(stage), strict=True))]
        # A rescale of this stage under way (``rescaling.py``), the stage's instances after it, and
        # the channels whose senders retired.
        self.handoff = (None if joining is None
                        else Handoff(instance, joining.before, self.plan.stages[stage].parallelism))
        self.peers: list[ActorHandle] = []
        self.me_rescaling: ActorHandle | None = None  # its own handle, while it hands keys over
        self.retired = 0
        self.finished = 0
        for channel in () if joining is None else joining.retired:  # senders gone before it came
            self.retired += 1
            self.finished += 1
            self.logic.upstream_done(channel, 0.0)
        self.monitor = monitor
        self.outputs: dict[str, list[Any]] = {}  # what the stage's collected ports emitted, by name
        self.records_in = self.records_out = 0
        self.timer: actorrt.Timer | None = None
        self.position: Any = None  # how far a pulled source was read
        self.me: ActorHandle | None = None  # this operator's handle, if it pulls from a source
        self.done = False
        self.ended = False  # it passed the end of its input on
        self.paused = False  # a pulled source stopped reading for a savepoint
        self.drained = 0  # upstream channels that passed a savepoint's barrier
        self.sink_writes: dict[int, int] = {}  # per port with a sink: the writes so far
        self.output_ids: dict[str, list[int]] = {}  # capturing lineage: the seqs of ``outputs``' records
        # Record lineage: the numbers of what it emits, and the relations it writes.
        self.capture = (Capture(instance_prefix(self.plan.lineage, stage, self.uid), self.plan.lineage_keep,
                                relates=self.plan.captures(stage))
                        if self.plan.numbers(stage) else None)
        self.logic.capture = self.plan.captures(stage)
        self._in_flight = self._no_refs()
        self._retiring_refs: list[deque[ObjectRef]] = []  # sent to instances a rescale took away
        self._handed: deque[ObjectRef] = deque()  # keys handed to other instances in a rescale
        self._metrics = OperatorMetrics()

    async def process(self, batch: list[Any], upstream: int = 0, born: float | None = None,
                      digest: bytes = b"", times: list[int] | None = None, mark: float | None = None,
                      idle: bool = False, seqs: Sequence[int] = ()) -> None:
        """A batch from upstream channel ``upstream``, read from the source at ``born``: in event
        time, its records' ``times`` (µs) and the sender's watermark ``mark`` after them (``idle``:
        the sender's inputs are all idle); ``seqs``: the records' IDs (capturing record lineage).
        ``digest`` is there for the ledger's check of a replayed upstream (``batch_digest``)."""
        # Only a stage that acts on processing time (windows, timers, a ttl) reads the clock: each
        # reading is an entry in the task's log (a new version of its spec), which other stages
        # need not pay for every batch. Its ticks read the same clock.
        on_the_clock = self.plan.time is None and tick_s(self.logic.stage.keyed) is not None
        now = actorrt.now() if on_the_clock or born is None else born
        await self._process(batch, upstream, now, now if born is None else born, times, mark, idle, seqs=seqs)

    async def _process(self, batch: list[Any], upstream: int, now: float, born: float,
                       times: list[int] | None = None, mark: float | None = None, idle: bool = False,
                       in_flight: int | None = None, seqs: Sequence[int] = ()) -> None:
        self.records_in += len(batch)
        if self.handoff is not None:  # a rescale: records of keys on their way here wait for them
            if self._defers(upstream, mark, idle):
                mark, idle = None, False
            batch, times, seqs = self._hold(batch, upstream, times, seqs, now, born)
        self._start_clock(now)
        outs = self._run(self.logic.process, batch, now, upstream, times, mark, idle, seqs)
        await self._emit(outs, born, in_flight, self.logic.sender_code(upstream), seqs)

    def _start_clock(self, now: float) -> None:
        """In processing time, a stage with windows, timers or a ttl looks at the clock (from
        its first record on; the first tick aligned to a window boundary)."""
        if self.plan.time is None and self.timer is None:
            tick = tick_s(self.logic.stage.keyed)
            if tick is not None:
                self.timer = actorrt.call_every(tick, self.tick, first_in=tick - now % tick)

    async def advance(self, upstream: int, mark: float, idle: bool, born: float) -> None:
        """Upstream channel ``upstream``'s watermark moved to ``mark`` (or it became idle), with
        no records for this instance; ``born``: when the batch that moved it was read."""
        if self._defers(upstream, mark, idle):
            return
        await self._emit(self._run(self.logic.advance, upstream, mark, idle, born), born)

    def start(self, me: ActorHandle) -> None:
        """Start reading (a source stage's instances; ``me`` is this one's handle): pull from the
        flow's pulled source, and in event time with ``idle_s``, look at the clock, so that an
        instance that reads nothing for that long stops holding the watermark back."""
        own = self.plan.stages[self.stage]
        if own.time is not None and own.time.idle_s is not None:
            self.timer = actorrt.call_every(max(IDLE_TICK_MIN_S, own.time.idle_s / IDLE_TICKS), self.tick)
        if pulled(own.source):
            self.me = me
            me.pull.remote()

    async def pull(self) -> None:
        """One batch of the source: the range found (and the time) is recorded, so a replay reads
        the same range; then the next pull is a task of its own (a call to itself while records
        come, a timer while none do), so nothing holds the mailbox for long."""
        if self.paused:
            return
        try:
            await self._pull()
        except RecordError:
            raise  # told to the monitor where it was raised
        except Exception as exc:
            # Nobody awaits a pull: without a word to the monitor the flow would wait for its end.
            self.monitor.stopped.remote(f"operator {self.__actorrt_label__()} stopped pulling its source: {exc!r}")
            raise

    async def _pull(self) -> None:
        source = self.plan.stages[self.stage].source
        found, now = actorrt.record(lambda: (source.next_range(self.position, self.plan.batch_size), time.time()))
        if found is None:
            if source.ended(self.position):
                await self.finish(0)
                self.done = True
            else:
                actorrt.call_later(getattr(source, "poll_s", PULL_IDLE_S), self.pull)
            return
        if self.logic.capture:
            batch, seqs = read_with_ids(source, found, self.records_in)
        else:
            batch, seqs = source.read(found), ()
        self.position = found[1]
        partial = len(batch) < self.plan.batch_size
        await self._process(batch, 0, now, now, seqs=seqs,
                            in_flight=min(PARTIAL_IN_FLIGHT, self.plan.max_in_flight) if partial else None)
        self.me.pull.remote()

    def finished_all(self) -> bool | None:
        """True once the source is read to its end; None until then (an acknowledgement)."""
        return True if self.done else None

    def pause(self) -> None:
        """Stop reading the source (for a savepoint): pulls after this one do nothing."""
        self.paused = True

    async def drain(self, upstream: int = 0, mark: float | None = None, idle: bool = False) -> None:
        """A savepoint's barrier from channel ``upstream``, which sends nothing more, with its
        watermark ``mark`` (event time). After the last channel's, once what this instance sent
        is processed, its consumers get the barrier with its own watermark; its timers stop, so
        nothing moves until its state is saved. As every instance hears every upstream
        instance's watermark here, all instances of a stage end at one watermark."""
        self.drained += 1
        if mark is not None and isinstance(self.logic.progress, InputProgress):
            now = actorrt.now()
            await self._emit(self._run(self.logic.advance, upstream, mark, idle, now), now)
        if self.drained < self.logic.upstreams - self.retired:
            return
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        await self._settle()
        watermark = self.logic.watermark_out or (None, False)
        for port in self.routes:
            for route in port:
                for handle in route.handles:
                    await handle.drain.remote(route.channel, *watermark)

    def savepoint_state(self) -> dict[str, Any]:
        """This instance's part of a savepoint (``savepoints.py``), once drained: its keyed
        state (taken out), watermark, how far its source was read, and its sinks' write numbers."""
        progress = self.logic.progress
        own = self.plan.stages[self.stage]
        return {**self.writes(),
                "keys": take_keys(self.logic, lambda key: True, self.uid).without_lineage()
                if own.keyed is not None else None,
                "watermark": None if progress is None else progress.mark,
                "newest": getattr(progress, "newest", None),
                "position": self.position, "source": own.source if pulled(own.source) else None}

    def writes(self) -> dict[str, Any]:
        """A savepoint's part with only its sinks' write numbers (an instance a rescale retires)."""
        return {"keys": None, "id": self.uid, "watermark": None, "newest": None, "position": None, "source": None,
                "sink_writes": dict(self.sink_writes)}

    def restore_savepoint(self, part: dict[str, Any]) -> None:
        """Start from a savepoint's part for this instance (before any record comes)."""
        if part["keys"] is not None:
            give_keys(self.logic, part["keys"])
        progress = self.logic.progress
        if progress is not None and part["watermark"] is not None:
            progress.mark = max(progress.mark, part["watermark"])
            if isinstance(progress, SourceProgress) and part["newest"] is not None:
                progress.newest = max(progress.newest, part["newest"])
        self.position = part["position"]
        if part["source"] is not None:
            self.plan.stages[self.stage].source = part["source"]
        self.sink_writes = dict(part["sink_writes"])

    async def tick(self) -> None:
        now = actorrt.now()
        await self._emit(self._run(self.logic.tick, now), now)

    def _run(self, step: Any, *args: Any) -> Any:
        """``step(*args)`` of the stage's logic; a record it fails on is told to the flow's monitor
        at once (the driver stops the run), then raised to whoever sent the batch."""
        try:
            return step(*args)
        except RecordError as exc:
            self.monitor.failed.remote(str(exc))
            raise

    async def finish(self, upstream: int = 0) -> None:
        """Upstream channel ``upstream`` is done; after the last, flush and pass the end on (not
        while records wait for keys a rescale moves here: after them)."""
        if self.ended:
            return  # (a sender a rescale added after the end: the end was passed on)
        if self.handoff is not None and self.handoff.awaiting:
            self.handoff.finishes.append(upstream)
            return
        self.finished += 1
        await self._end_if_last(upstream)

    async def _end_if_last(self, upstream: int) -> None:
        """``upstream`` no longer holds the watermark back; after the last, flush and pass the
        end on."""
        now = actorrt.now()
        out = self._run(self.logic.upstream_done, upstream, now)
        if self.finished < self.logic.upstreams:
            await self._emit(out, now)
            return
        if self.timer is not None:
            self.timer.cancel()
        await self._emit([mine.then(last) for mine, last in zip(out, self._run(self.logic.finish), strict=True)], now)
        await self._settle()
        if self.capture is not None:  # its records' relations are in the store before anyone hears of the end
            await actorrt.commit_lineage()
        self.ended = True
        for port in self.routes:
            for route in port:
                for handle in route.handles:
                    await handle.finish.remote(route.channel)

    def results(self) -> tuple[dict[str, list[Any]], list[Any], list[Any], dict[str, int]]:
        """The records of the stage's collected ports (by name), the records put aside, late
        records, and record counts (with rates and, where records leave the flow, latency
        percentiles)."""
        counts = {"in": self.records_in, "out": self.records_out, "id": self.uid, **self._metrics.summary()}
        return self.outputs, self.logic.dead_letters, self.logic.late, counts, self.output_ids

    async def _emit(self, outs: list[Out], born: float, in_flight: int | None = None, code: int = SOURCE,
                    in_seqs: Sequence[int] = ()) -> None:
        """Send each port's records on (made of input read at ``born``), keep or write them where
        the port says; ``in_flight``: unprocessed batches left at each consumer (``max_in_flight``
        if None). In event time every consumer hears this instance's watermark: with its records,
        or alone. Capturing lineage, the records are numbered and related to the task's input
        (``in_seqs`` from sender ``code``), and their numbers go with them."""
        self.records_out += sum(len(out.records) for out in outs)
        self._metrics.counted(self.records_in, self.records_out)
        numbers: list[Sequence[int] | None] = [None] * len(outs)
        if self.capture is not None:
            numbers, writes = self.capture.relate(code, in_seqs, outs, self.logic.history.take())
            if writes is not None:
                relation_queue().add(writes)
        for p, (port, out) in enumerate(zip(self.logic.stage.ports, outs, strict=True)):
            records = out.records
            if records and (port.collect is not None or port.sink is not None):
                self._metrics.arrived(born)
            if port.collect is not None:
                self.outputs.setdefault(port.collect, []).extend(records)
                if numbers[p] is not None:
                    self.output_ids.setdefault(port.collect, []).extend(numbers[p])
            if port.sink is not None and records:
                if getattr(port.sink, "exactly_once", True):
                    await actorrt.commit_lineage()  # a replay then writes the same records as this write
                self.sink_writes[p] = self.sink_writes.get(p, 0) + 1
                writer = f"{self.plan.name}/{self.stage}/{self.uid}" + (f"/{p}" if p else "")
                port.sink.write(writer, self.sink_writes[p], records)
            for r, route in enumerate(self.routes[p]):
                await self._send_all(route, self._in_flight[p][r], out, born, in_flight, numbers[p])

    async def _send_all(self, route: _Route, queues: list[deque[ObjectRef]], out: Out, born: float,
                        in_flight: int | None, numbers: Sequence[int] | None) -> None:
        for message in self._run(route.fanout.messages, out, self.logic.watermark_out, self.logic.dead_letters,
                                 numbers):
            consumer = route.handles[message.to]
            if isinstance(message, Batch):
                args = (message.records, route.channel, born, digest(message.records, message.times))
                if message.mark is not None:  # event time
                    args += (message.times, message.mark, message.idle)
                if message.seqs is not None:
                    call = consumer.process.remote(*args, seqs=message.seqs)
                else:
                    call = consumer.process.remote(*args)
            else:
                call = consumer.advance.remote(route.channel, message.mark, message.idle, born)
            queue = queues[message.to]
            queue.append(call)
            while len(queue) > (self.plan.max_in_flight if in_flight is None else in_flight):
                ref = queue.popleft()
                if not held_here(ref.object_id):  # (a checkpointing operator's calls leave with its checkpoint)
                    await waiting_behind(actorrt.ran(ref))  # back-pressure: the consumer is behind

    async def _settle(self) -> None:
        """Wait until every batch this instance sent was processed."""
        for queue in self._retiring_refs + [self._handed]:
            while queue:
                await actorrt.ran(queue.popleft())
        for port in self._in_flight:
            for queues in port:
                for queue in queues:
                    while queue:
                        await actorrt.ran(queue.popleft())

    def _no_refs(self) -> list[list[list[deque[ObjectRef]]]]:
        return [[[deque() for _ in route.handles] for route in port] for port in self.routes]

    def checkpoint(self) -> dict[str, Any]:
        # In-flight refs and metrics are not state: what refs wait for was sent (and is re-sent if
        # need be), and metrics describe this process's run. (Relations it queued are written
        # before the checkpoint is made durable: see the checkpointer.)
        return {k: v for k, v in self.__dict__.items()
                if k not in ("_in_flight", "_retiring_refs", "_handed", "_metrics")}

    def restore(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._in_flight = self._no_refs()
        self._retiring_refs = []
        self._handed = deque()
        self._metrics = OperatorMetrics()

    def __actorrt_stopped__(self, why: str) -> None:
        self.monitor.stopped.remote(f"operator {self.__actorrt_label__()} was stopped: {why}")

    def __actorrt_label__(self) -> str:
        return f"{_stage_label(self.plan, self.stage)}#{self.instance}"

    def __actorrt_inputs__(self) -> list[str]:
        return [_stage_label(self.plan, put.stage) for put in self.plan.stages[self.stage].inputs]

    def __actorrt_metrics__(self) -> dict[str, float]:
        # Batches sent, not yet processed downstream.
        backlog = sum(len(queue) for port in self._in_flight for queues in port for queue in queues)
        return {"records_in": self.records_in, "records_out": self.records_out, "backlog_batches": backlog,
                **self._metrics.summary()}


def _stage_label(plan: Plan, stage: int) -> str:
    """A stage's name for people: the flow's, its index and its own (an instance's label adds ``#i``)."""
    return f"{plan.name}/{stage} {plan.stages[stage].name}"
