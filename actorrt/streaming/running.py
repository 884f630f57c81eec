"""A dataflow under way: ``RunningFlow`` feeds its sources and finishes it; ``Watch`` is the
driver's side of it, raising an operator's failure as soon as the flow's monitor has it.

``Dataflow.run()`` is ``start()``, ``feed_sources()``, ``finish()``; ``bridge.stream`` calls ``feed``
once per micro-batch, under the query's marks.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import actorrt
from actorrt.core.object_ref import ObjectRef
from actorrt.handles import ActorHandle
from actorrt.lineage.records import RecordId, marked_row_number
from actorrt.streaming import rescale_driver, savepoints
from actorrt.streaming.logic import DeadLetter
from actorrt.streaming.plan import Fed, Plan, pulled

if TYPE_CHECKING:
    from actorrt.streaming.dataflow import Dataflow

# How often a running flow asks its monitor whether an operator failed.
WATCH_S = 0.05


@dataclass
class RunResult:
    """What a run gave: the records of the streams collected (``outputs``: by ``collect()``;
    ``collected``: every name ``collect(name)`` gave), the records operators put aside
    (``on_error="dead_letter"``), late records (the side output of event-time windows and
    joins), and per-operator record counts."""

    outputs: list[Any] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    late: list[Any] = field(default_factory=list)  # records behind the watermark at a window or a join
    operators: list[dict[str, Any]] = field(default_factory=list)
    collected: dict[str, list[Any]] = field(default_factory=dict)
    # Capturing record lineage (Dataflow(lineage=True)): the IDs of ``outputs``' records, in their
    # order, and of each collected name's (what actorrt.lineage.backward takes).
    ids: list[RecordId] = field(default_factory=list)
    collected_ids: dict[str, list[RecordId]] = field(default_factory=dict)
    lineage: str | None = None  # the run's name in the lineage store (its records' ``flow``)


class RunningFlow:
    """A deployed dataflow (``Dataflow.start()``): ``feed`` it records as they come, then ``finish``.

    A failure of the flow (an operator's ``RecordError`` or ``OperatorStoppedError``, a timeout) is
    raised by the call that meets it; the flow's operators are then stopped, and later calls raise
    it again. An error of the records fed (the iterable's own) leaves the flow running. Calls may
    come from several threads (a streaming query's, the one that stops it): one runs at a time.
    """

    def __init__(self, flow: Dataflow, stages: list[list[ActorHandle]], watch: Watch) -> None:
        self._flow = flow
        self._plan = flow._plan
        self._stages = stages
        self._watch = watch
        self._lock = threading.Lock()
        self._feeds: dict[int, int] = {}  # per source stage: feeds so far
        self._failure: BaseException | None = None
        self._finished = False
        # What rescales change (``rescale_driver.py``), per stage: the (stage, uid) behind each
        # channel and the input it is of (appended to, never renumbered), the channels whose
        # senders retired, the next uid to give, the results of instances retired, and their
        # sinks' write numbers.
        plan = self._plan
        self._layouts = [[list(plan.producer(s, c)) for c in range(len(plan.channels(s)))] for s in range(len(stages))]
        self._channel_inputs = [[k for k, put in enumerate(stage.inputs)
                                 for _ in range(plan.stages[put.stage].parallelism)] for stage in plan.stages]
        self._retired_channels: list[list[int]] = [[] for _ in stages]
        self._instances = [len(ops) for ops in stages]
        self._retired: list[tuple[int, Any]] = []
        self._retired_writes: list[list[dict[str, Any]]] = [[] for _ in stages]  # (stage, what results() gave)

    @property
    def flow(self) -> Dataflow:
        """The dataflow this runs."""
        return self._flow

    @property
    def active(self) -> bool:
        """Whether the flow takes records: not finished, cancelled or failed."""
        return not self._finished

    @property
    def batch_size(self) -> int:
        """Records per batch that ``feed`` sends."""
        return self._plan.batch_size

    def feed(self, records: Iterable[Any], *, mark: tuple[str, int] | None = None, source: str | None = None) -> None:
        """Send ``records`` to a ``Fed()`` source's stage in batches of ``batch_size``, round robin
        over its instances; returns once each instance took every batch (never more than
        ``max_in_flight`` of them unprocessed per instance: the driver blocks meanwhile).

        Args:
            records: any iterable; it is read as the batches go out.
            mark: ``(source, batch_id)``: each batch is applied at most once per instance under
                this mark, so records fed again with the same mark (a restarted streaming query
                running its last micro-batch again) are skipped where they were applied, as long
                as they come in the same order. A source's batch ids must grow from one feed to
                the next: one fed before may come again, a smaller one is skipped.
            source: the name of the ``Fed()`` source (``Dataflow.source(..., name=)``) the records
                are for; needed where the flow has several.

        Raises:
            RecordError: an operator failed on a record (the flow stops).
            OperatorStoppedError: the runtime stopped an operator (the flow stops).
            actorrt.GetTimeoutError: the run went past ``start``'s timeout (the flow stops).
        """
        stage = self._fed_source(source)
        _check_mark(mark)
        with self._lock:
            self._check_open("feed")
            sender = self._sender(stage, mark)
            for batch in _batches(records, self._plan.batch_size):  # its errors are the input's: not the flow's
                with self._stopped_on_failure():
                    sender.send(batch)
            with self._stopped_on_failure():
                sender.drain()

    def feed_sources(self) -> None:
        """Read the flow's iterable sources (``run()`` does): a batch of each in turn, so that
        their event times move on together."""
        with self._lock:
            self._check_open("feed")
            feeding = [(self._sender(s, None), _batches(self._plan.stages[s].source, self._plan.batch_size))
                       for s in self._flow._driver_read()]
            while feeding:
                for sender, batches in list(feeding):
                    batch = next(batches, None)  # its errors are the input's: not the flow's
                    with self._stopped_on_failure():
                        if batch is None:
                            feeding.remove((sender, batches))
                            sender.drain()
                        else:
                            sender.send(batch)

    def _sender(self, stage: int, mark: tuple[str, int] | None) -> _Sender:
        # Where the round robin begins: at the batch id under a mark (a micro-batch fed again
        # must reach the same instances), else on from the last feed (from 0 every time, the
        # batches of small feeds would all go to the first instance).
        begin = mark[1] if mark is not None else self._feeds.get(stage, 0)
        self._feeds[stage] = self._feeds.get(stage, 0) + 1
        # Record lineage names a fed record (feed or micro-batch, row in it); a read one by its row.
        ids = None
        if self._plan.captures(stage):
            fed = isinstance(self._plan.stages[stage].source, Fed)
            ids = marked_row_number(begin, 0) if fed else 0
        return _Sender(self._plan, self._stages[stage], self._watch, mark, begin, ids)

    def _fed_source(self, name: str | None) -> int:
        fed = [s for s in self._plan.sources if isinstance(self._plan.stages[s].source, Fed)]
        if not fed:
            raise ValueError(f"dataflow {self._plan.name} has no Fed() source: feed() is for a flow built with "
                             f"source(Fed())")
        if name is None:
            if len(fed) > 1:
                raise ValueError(f"dataflow {self._plan.name} has several Fed() sources: feed(..., source=) names "
                                 f"one of {[self._plan.stages[s].source_name for s in fed]}")
            return fed[0]
        for s in fed:
            if self._plan.stages[s].source_name == name:
                return s
        raise ValueError(f"dataflow {self._plan.name} has no Fed() source named {name!r}: it has "
                         f"{[self._plan.stages[s].source_name for s in fed]}")

    def finish(self, *, timeout: float | None = None) -> RunResult:
        """Pass the end of the input down the stages (a pulled source: wait for its end); returns
        what the collected streams emitted, what was put aside, and per-operator counts.

        Args:
            timeout: seconds this call may take, within ``start``'s limit for the whole run.

        Raises:
            RecordError: an operator failed on a record (the flow stops).
            OperatorStoppedError: the runtime stopped an operator (the flow stops).
            actorrt.GetTimeoutError: the flow did not finish in time (it stops).
        """
        with self._lock:
            self._check_open("finish")
            self._watch.limit(timeout)
            with self._stopped_on_failure():
                fed = [op for s in self._plan.sources if not pulled(self._plan.stages[s].source)
                       for op in self._stages[s]]
                if fed:
                    self._watch.get([op.finish.remote() for op in fed])
                for s in self._plan.sources:
                    if pulled(self._plan.stages[s].source):
                        while not self._watch.polled(self._stages[s][0].finished_all):
                            self._watch.pause()
            self._finished = True
            return self._results()

    def stop(self, *, savepoint: str | Path | None = None, timeout: float | None = None) -> RunResult:
        """Stop a flow that may never end, cleanly: its sources stop reading, every record read is
        processed downstream (windows stay open: nothing is finished), then, with ``savepoint``,
        every operator's state, watermark and source position is written to that directory
        (``savepoints.py``), for ``Dataflow.start(from_savepoint=)``. Returns what the collected
        streams emitted until the stop; the operators are then stopped.

        Raises:
            RecordError, OperatorStoppedError: the flow failed (it stops; no savepoint is written).
            actorrt.GetTimeoutError: the drain took longer than ``timeout`` (the flow stops).
        """
        with self._lock:
            self._check_open("stop")
            self._watch.limit(timeout)
            with self._stopped_on_failure():
                sources = [(s, op) for s in self._plan.sources for op in self._stages[s]]
                self._watch.get([op.pause.remote() for s, op in sources if pulled(self._plan.stages[s].source)])
                self._watch.get([op.drain.remote() for _, op in sources])
                result = self._results()
                if savepoint is not None:
                    parts = [self._watch.get([op.savepoint_state.remote() for op in ops]) + retired
                             for ops, retired in zip(self._stages, self._retired_writes, strict=True)]
                    savepoints.write(savepoint, self._plan, parts, [len(ops) for ops in self._stages], self._instances)
            self._stop()
            return result

    def _restore(self, parts: list[list[dict[str, Any]]], instances: list[int]) -> None:
        """Give every instance its part of a savepoint (``Dataflow.start(from_savepoint=)``);
        ``instances``: the uids the saved run gave, per stage (later ones are new names)."""
        self._instances = [max(mine, saved) for mine, saved in zip(self._instances, instances, strict=True)]
        with self._stopped_on_failure():
            self._watch.get([op.restore_savepoint.remote(part) for ops, stage_parts in zip(self._stages, parts,
                                                                                          strict=True)
                             for op, part in zip(ops, stage_parts, strict=True)])

    def rescale(self, stage: int | str, parallelism: int, *, timeout: float | None = None) -> None:
        """Run keyed stage ``stage`` (an index or a name) on ``parallelism`` instances from now on,
        while the flow runs (``rescaling.py``): the keys whose instance changes move with their
        state, windows and timers; their records wait meanwhile, the other keys' do not. Nothing
        is lost or counted twice, a node kill during the move included. Returns once the move is
        over.

        Raises:
            ValueError: no such stage, or it has no keyed step, or ``parallelism`` is not an int >= 1.
            RecordError, OperatorStoppedError: the flow failed (it stops).
            actorrt.GetTimeoutError: the move took longer than ``timeout`` (the flow stops).
        """
        index = rescale_driver.check(self._plan, stage, parallelism)
        with self._lock:
            self._check_open("rescale")
            if parallelism == len(self._stages[index]):
                return
            self._watch.limit(timeout)
            with self._stopped_on_failure():
                rescale_driver.rescale(self, index, parallelism)

    def cancel(self) -> None:
        """Stop the flow without its results: its operators are killed."""
        if not self._finished:
            self._stop()

    def _start_reading(self) -> None:
        """Have the sources' instances start: reading a pulled source, and watching the clock for
        idleness in event time."""
        with self._stopped_on_failure():
            self._watch.get([op.start.remote(op) for s in self._plan.sources for op in self._stages[s]])

    def _results(self) -> RunResult:
        result = RunResult(lineage=self._plan.lineage)
        result.collected["outputs"] = result.outputs
        result.collected_ids["outputs"] = result.ids
        answered = self._retired + [(s, answer) for s, ops in enumerate(self._stages)
                                    for answer in actorrt.get([op.results.remote() for op in ops],
                                                              timeout=self._watch.left())]
        # (with the instances rescales retired: what they emitted before they went counts too)
        answered.sort(key=lambda a: (a[0], a[1][3]["id"]))
        for s, (outputs, dead, late, counts, ids) in answered:
            for name, records in outputs.items():
                result.collected.setdefault(name, []).extend(records)
            uid = counts.pop("id")  # (its name for good: a rescale may put another at its place)
            for name, seqs in ids.items():
                named = result.collected_ids.setdefault(name, [])
                named.extend(RecordId(self._plan.lineage, s, uid, q) for q in seqs)
            result.dead_letters.extend(dead)
            result.late.extend(late)
            result.operators.append({"stage": s, "name": self._plan.stages[s].name, "instance": uid, **counts})
        return result

    def _check_open(self, call: str) -> None:
        if self._failure is not None:
            raise self._failure
        if self._finished:
            raise ValueError(f"dataflow {self._plan.name} was finished or cancelled: {call}() needs a running "
                             f"flow (start() it again)")

    @contextlib.contextmanager
    def _stopped_on_failure(self) -> Iterator[None]:
        try:
            yield
        except BaseException as exc:
            self._failure = exc
            self._stop()
            raise

    def _stop(self) -> None:
        self._finished = True
        for actor in self._flow.actors:
            actorrt.kill(actor)  # a failed flow stops: its operators take no more input


def _check_mark(mark: Any) -> None:
    if mark is None:
        return
    if not (isinstance(mark, tuple) and len(mark) == 2 and isinstance(mark[0], str) and mark[0]
            and isinstance(mark[1], int) and not isinstance(mark[1], bool) and mark[1] >= 0):
        raise ValueError(f"mark must be (source name, batch id >= 0), not {mark!r}")


class Watch:
    """The driver's side of a running flow: waits, and raises an operator's failure as soon as the
    flow's monitor has it, instead of when a result that carries it is awaited."""

    def __init__(self, monitor: ActorHandle, timeout: float | None) -> None:
        self.monitor = monitor  # the flow's
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._asked = 0.0
        self._pause = 0.001

    def check(self) -> None:
        now = time.monotonic()
        if self._deadline is not None and now > self._deadline:
            raise actorrt.GetTimeoutError("the dataflow did not finish in time")
        if now - self._asked >= WATCH_S:
            self._asked = now
            failure = actorrt.get(self.monitor.first_failure.remote(), timeout=self.left())
            if failure is not None:
                raise failure

    def get(self, refs: Any) -> Any:
        """``actorrt.get(refs)``, checking the monitor meanwhile."""
        many = isinstance(refs, list)
        pending = list(refs) if many else [refs]
        if not pending:
            return []
        while True:
            self.check()
            ready, _ = actorrt.wait(pending, num_returns=len(pending), timeout=WATCH_S)
            if len(ready) == len(pending):
                values = actorrt.get(pending, timeout=self.left())
                return values if many else values[0]

    def polled(self, method: Any) -> Any:
        """``method.remote()``'s value; None if a global rollback took the call back (``ft=
        "checkpoint"``: every operator, the pulled source's included, is back at the last global
        checkpoint, and goes on from there)."""
        try:
            return self.get(method.remote())
        except actorrt.RolledBackError:
            return None

    def pause(self) -> None:
        """Between polls of a flow's end: backing off to ``WATCH_S``."""
        self.check()
        time.sleep(self._pause)
        self._pause = min(2 * self._pause, WATCH_S)

    def limit(self, timeout: float | None) -> None:
        """From now, wait ``timeout`` seconds at most (within the deadline there is)."""
        if timeout is not None:
            deadline = time.monotonic() + timeout
            self._deadline = deadline if self._deadline is None else min(self._deadline, deadline)

    def left(self) -> float | None:
        """Seconds to the deadline (None: there is none)."""
        return None if self._deadline is None else max(self._deadline - time.monotonic(), 0.001)


def _batches(records: Iterable[Any], size: int) -> Iterator[list[Any]]:
    records = iter(records)
    while batch := list(itertools.islice(records, size)):
        yield batch


class _Sender:
    """One feed's batches to a source's stage: round robin from instance ``begin``, never more than
    ``max_in_flight`` unprocessed per instance; under a ``mark``, each batch is marked with its
    number among those its instance gets from this feed."""

    def __init__(self, plan: Plan, first: list[ActorHandle], watch: Watch, mark: tuple[str, int] | None,
                 begin: int, ids: int | None = None) -> None:
        self._plan, self._first, self._watch, self._mark = plan, first, watch, mark
        self._turn = begin
        self._ids = ids  # the next record's ID (capturing record lineage)
        self._sent = [0] * len(first)
        self._in_flight: list[deque[ObjectRef]] = [deque() for _ in first]

    def send(self, batch: list[Any]) -> None:
        i = self._turn % len(self._first)
        self._turn += 1
        process = self._first[i].process
        kwargs = {}
        if self._ids is not None:
            kwargs["seqs"] = range(self._ids, self._ids + len(batch))
            self._ids += len(batch)
        if self._mark is None:
            ref = process.remote(batch, 0, time.time(), **kwargs)
        else:
            ref = process.remote_once(*self._mark, self._sent[i], batch, 0, time.time(), **kwargs)
        self._sent[i] += 1
        queue = self._in_flight[i]
        queue.append(ref)
        if len(queue) > self._plan.max_in_flight:
            self._watch.get(queue.popleft())  # back-pressure: the driver waits
        else:
            self._watch.check()  # a failure stops the feed at once, not when the window is full

    def drain(self) -> None:
        for queue in self._in_flight:
            self._watch.get(list(queue))
