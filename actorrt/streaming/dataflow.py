"""Building and running a dataflow: ``Dataflow`` and ``Stream``, in the style of Bytewax and Flink.

    flow = Dataflow("wordcount", batch_size=20)
    counts = (flow.source(lines)
              .flat_map(str.split, parallelism=2)
              .key_by(lambda word: word)
              .fold(lambda: 0, lambda n, word: n + 1, parallelism=2))
    counts.collect()
    result = flow.run()          # result.outputs: (word, count) updates, in each instance's order

Every stage runs as ``parallelism`` operator actors, deployed here; ``run`` then feeds the source
through a ``RunningFlow`` (``running.py``). A flow whose records come as they come (a streaming
query's micro-batches) is built with ``source(Fed())`` and run in steps: ``running = flow.start()``,
``running.feed(records)`` as often as records arrive, then ``running.finish()``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import actorrt
from actorrt.handles import ActorHandle
from actorrt.streaming.connectors import Sink, Source
from actorrt.streaming.operator import Monitor, Operator
from actorrt.streaming.plan import (
    EventTime,
    Plan,
    Session,
    Sliding,
    Stage,
    Step,
    Tumbling,
    Window,
    check_lateness,
    check_on_error,
    check_parallelism,
    step_name,
)
from actorrt.streaming.running import RunningFlow, RunResult, Watch
from actorrt.util import pickling

_operator = actorrt.remote(Operator)
_monitor = actorrt.remote(Monitor)
# Operators checkpoint after this many tasks by default: a failure replays at most about as many.
DEFAULT_CHECKPOINT_EVERY = 1000


class Fed:
    """The source of a flow its driver feeds: ``flow.source(Fed())``, then ``flow.start()`` and
    ``RunningFlow.feed(records)`` as records come (``bridge.SPARK`` is one, for ``bridge.stream``)."""


class Stream:
    """The records one step of a dataflow makes; each method adds a step and returns its stream."""

    def __init__(self, flow: Dataflow) -> None:
        self._flow = flow

    # Stateless steps run in the stage before them; with ``parallelism`` they start a stage of their
    # own (records reach it in turn). ``on_error``: "fail" (the run stops with the record) or
    # "dead_letter" (the record is put aside in ``RunResult.dead_letters`` and the run goes on).

    def map(self, fn: Callable[[Any], Any], *, parallelism: int | None = None, name: str | None = None,
            on_error: str = "fail") -> Stream:
        """Each record becomes ``fn(record)``."""
        return self._stateless("map", fn, name, on_error, parallelism)

    def flat_map(self, fn: Callable[[Any], Iterable[Any]], *, parallelism: int | None = None,
                 name: str | None = None, on_error: str = "fail") -> Stream:
        """Each record becomes the records ``fn(record)`` returns."""
        if not callable(fn):
            raise TypeError(f"flat_map() takes a function, not {fn!r}")
        return self._stateless("flat_map", lambda record: list(fn(record)), name or step_name("flat_map", fn, None),
                               on_error, parallelism)

    def filter(self, fn: Callable[[Any], bool], *, parallelism: int | None = None, name: str | None = None,
               on_error: str = "fail") -> Stream:
        """The records for which ``fn(record)`` is true."""
        return self._stateless("filter", fn, name, on_error, parallelism)

    def key_by(self, key: Callable[[Any], Any]) -> KeyedStream:
        """Records by ``key(record)``: the next step keeps state per key, on the instance that owns it."""
        return KeyedStream(self._flow, key)

    def collect(self) -> None:
        """Keep what this stream emits: ``run()`` returns it in ``RunResult.outputs``."""
        self._flow._collected = True

    def sink(self, sink: Sink) -> None:
        """Write what this stream emits to ``sink`` (e.g. ``RedisStreamSink``), exactly once."""
        if not callable(getattr(sink, "write", None)):
            raise TypeError(f"sink() takes a sink with a write(writer, number, records) method, not {sink!r}")
        self._flow._plan.sink = sink

    def _stateless(self, kind: str, fn: Callable[..., Any], name: str | None, on_error: str,
                   parallelism: int | None) -> Stream:
        if not callable(fn):
            raise TypeError(f"{kind}() takes a function, not {fn!r}")
        if parallelism is not None:
            self._flow._new_stage(check_parallelism(parallelism), None)
        self._flow._stage().steps.append(Step(kind, step_name(kind, fn, name), fn, on_error=check_on_error(on_error)))
        return self


class KeyedStream:
    def __init__(self, flow: Dataflow, key: Callable[[Any], Any]) -> None:
        if not callable(key):
            raise TypeError(f"key_by() takes a function of a record, not {key!r}")
        self._flow = flow
        self._key = key

    def fold(self, init: Callable[[], Any], fn: Callable[[Any, Any], Any], *, parallelism: int = 1,
             name: str | None = None, on_error: str = "fail", emit: str = "updates") -> Stream:
        """Per key, ``state = fn(state, record)`` from ``init()``. ``emit="updates"``: after each
        batch, emits ``(key, state)`` for every key the batch changed; ``emit="final"``: emits
        ``(key, state)`` once per key, at the end of the input."""
        if emit not in ("updates", "final"):
            raise ValueError(f'fold(emit=) is "updates" or "final", not {emit!r}')
        return self._keyed(Step("fold", step_name("fold", fn, name), fn, init, on_error=check_on_error(on_error),
                                emit=emit), parallelism)

    def reduce(self, fn: Callable[[Any, Any], Any], *, parallelism: int = 1, name: str | None = None,
               on_error: str = "fail", emit: str = "updates") -> Stream:
        """Per key, ``fn(previous, record)`` with the first record as the start (``emit``: as ``fold``'s)."""
        first = object()
        return self.fold(lambda: first, lambda acc, record: record if acc is first else fn(acc, record),
                         parallelism=parallelism, name=name or step_name("reduce", fn, None), on_error=on_error,
                         emit=emit)

    def window(self, window: Window, init: Callable[[], Any], fn: Callable[[Any, Any], Any], *,
               lateness_s: float = 0.0, merge: Callable[[Any, Any], Any] | None = None, parallelism: int = 1,
               name: str | None = None, on_error: str = "fail") -> Stream:
        """Per key and window, ``state = fn(state, record)`` from ``init()``; when a window ends
        (on time, records or not) emits ``(key, start, end, state)``.

        Windows are in event time if the flow's source has one (``source(..., time=EventTime(...))``):
        a window ends when the watermark passes its end plus ``lateness_s``, and a record for a
        window that ended is late (``RunResult.late``). Otherwise they are in processing time: a
        record belongs to the windows of the time its batch reached the operator.

        Args:
            window: ``Tumbling``, ``Sliding`` or ``Session``.
            lateness_s: event time: how long after the watermark passes a window's end it waits
                for late records (and emits it); what it emits is held back as long downstream.
            merge: joins the states of two sessions that an out-of-order record bridges (session
                windows in event time need it).
        """
        if not isinstance(window, (Tumbling, Sliding, Session)):
            raise TypeError(f"window() takes Tumbling, Sliding or Session, not {window!r}")
        event_time = self._flow._plan.time is not None
        check_lateness(lateness_s, event_time)
        if isinstance(window, Session) and event_time and merge is None:
            raise ValueError("session windows in event time need merge=: a late record can join two sessions")
        step = Step("window", step_name("window", fn, name), fn, init, window, check_on_error(on_error), lateness_s,
                    merge)
        return self._keyed(step, parallelism)

    def _keyed(self, step: Step, parallelism: int) -> Stream:
        stage = self._flow._new_stage(check_parallelism(parallelism), self._key)
        stage.steps.append(step)
        return Stream(self._flow)


class Dataflow:
    """A dataflow: a source, then stages of operators. Build it, then ``run()`` it, or ``start()``
    it if it is fed (on the cluster of ``actorrt.init()``)."""

    def __init__(self, name: str, *, batch_size: int = 100, max_in_flight: int = 8,
                 checkpoint_every: int | None = DEFAULT_CHECKPOINT_EVERY) -> None:
        """``batch_size``: records per batch from the source; ``max_in_flight``: batches a producer
        may have unprocessed at each consumer; ``checkpoint_every``: each operator checkpoints after
        that many of its tasks (None: only when asked), which bounds what a failure replays."""
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, not {batch_size!r}")
        if not isinstance(max_in_flight, int) or max_in_flight < 1:
            raise ValueError(f"max_in_flight must be an int >= 1, not {max_in_flight!r}")
        self._plan = Plan(name, batch_size=batch_size, max_in_flight=max_in_flight)
        self._checkpoint_every = checkpoint_every
        self._collected = False
        self._fed = False  # source(Fed()): the records come through RunningFlow.feed
        # The actors of the run under way: every stage's instances and the flow's monitor (what a
        # global checkpoint of the flow takes, with ``ft="checkpoint"``).
        self.actors: list[ActorHandle] = []

    def source(self, records: Iterable[Any] | Source | Fed, *, parallelism: int = 1,
               time: EventTime | None = None) -> Stream:
        """Records from ``records``: any iterable, read by the driver that runs the flow (each
        batch it sends is logged); a pulled ``Source`` (``RedisStreamSource``, ``ListSource``),
        read by the first operator, whose lineage keeps the offsets it read; or ``Fed()``, records
        the driver passes to ``RunningFlow.feed`` as they come (``start()`` runs such a flow).

        Args:
            parallelism: instances that read the records (the driver's go to them in turn).
            time: ``EventTime(of, max_delay_s, idle_s)``: each record's time is ``of(record)``,
                each instance makes a watermark of what it read, and windows are in event time.
                None: windows are in processing time.
        """
        if self._plan.source is not None or self._plan.pulled is not None or self._fed:
            raise ValueError(f"dataflow {self._plan.name} has a source already")
        if time is not None and not isinstance(time, EventTime):
            raise TypeError(f"source(time=) takes EventTime(of, max_delay_s=..., idle_s=...), not {time!r}")
        if callable(getattr(records, "next_range", None)):
            if parallelism != 1:
                raise ValueError("a pulled source is read by one operator: parallelism=1 (spread the work after it)")
            self._plan.pulled = records
        elif isinstance(records, Fed):
            self._fed = True
        else:
            self._plan.source = records
        self._plan.time = time
        self._new_stage(check_parallelism(parallelism), None)
        return Stream(self)

    @property
    def plan(self) -> Plan:
        """The logical dataflow as built so far: plain data (stages of steps), what operators run."""
        return self._plan

    @property
    def fed(self) -> bool:
        """Whether the flow's source is ``Fed()``: its records come through ``RunningFlow.feed``."""
        return self._fed

    def run(self, *, timeout: float | None = None) -> RunResult:
        """Run to the end of the source; returns what the last stage emitted (if collected)."""
        if self._fed:
            raise ValueError(f"dataflow {self._plan.name} is fed (source(Fed())): start() it, feed() it records, "
                             f"then finish() it (bridge.stream does, for a Spark streaming query)")
        running = self._start(timeout)
        try:
            if self._plan.source is not None:
                running.feed(self._plan.source)
            return running.finish()
        except BaseException:
            running.cancel()  # the source's own error ends the run too (a flow's failure stopped it already)
            raise

    def start(self, *, timeout: float | None = None) -> RunningFlow:
        """Deploy the operators of a flow built with ``source(Fed())`` (or a pulled source, which
        its first operator starts reading now); returns the running flow, to ``feed`` and ``finish``.

        Args:
            timeout: seconds the whole run may take, until ``finish()`` returns (None: no limit).

        Raises:
            ValueError: the flow has no source, or an iterable one (``run()`` reads that).
        """
        if self._plan.source is not None:
            raise ValueError(f"dataflow {self._plan.name} reads its source(iterable) with run(); build it with "
                             f"source(Fed()) to start() it and feed() it records as they come")
        return self._start(timeout)

    def _start(self, timeout: float | None) -> RunningFlow:
        plan = self._plan
        if plan.source is None and plan.pulled is None and not self._fed:
            raise ValueError(f"dataflow {plan.name} has no source")
        source, plan.source = plan.source, None  # the operators get the plan, not the driver's input
        try:
            blob = pickling.dumps(plan)
        finally:
            plan.source = source
        monitor = _monitor.remote()
        stages = _deploy(plan, blob, monitor, self._checkpoint_every)
        self.actors = [op for ops in stages for op in ops] + [monitor]
        running = RunningFlow(self, stages, Watch(monitor, timeout))
        running._start_reading()
        return running

    def _stage(self) -> Stage:
        if not self._plan.stages:
            raise ValueError("a dataflow starts with source()")
        return self._plan.stages[-1]

    def _new_stage(self, parallelism: int, key: Callable[[Any], Any] | None) -> Stage:
        stage = Stage(parallelism, key)
        self._plan.stages.append(stage)
        return stage


def _deploy(plan: Plan, blob: bytes, monitor: ActorHandle, checkpoint_every: int | None) -> list[list[ActorHandle]]:
    """Operator actors for every stage, the last first (each is given its consumers)."""
    stages: list[list[ActorHandle]] = []
    downstream: list[ActorHandle] = []
    for s in range(len(plan.stages) - 1, -1, -1):
        upstreams = plan.stages[s - 1].parallelism if s > 0 else 1
        # With one sender an operator's order is its sender's: only where others cut in (its own
        # timers, the driver) is it recorded. Several senders interleave in arrival order.
        options = _operator.options(nondeterministic=upstreams > 1, checkpoint_every=checkpoint_every)
        ops = [options.remote(blob, s, i, downstream, upstreams, monitor) for i in range(plan.stages[s].parallelism)]
        stages.insert(0, ops)
        downstream = ops
    return stages
