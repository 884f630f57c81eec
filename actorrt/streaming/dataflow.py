"""A dataflow: its sources, and running it (``Dataflow``), in the style of Bytewax and Flink; the
streams it is built from are in ``streams.py``.

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

import uuid
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

import actorrt
from actorrt.core.record_lineage import lineage_store
from actorrt.handles import ActorHandle, ActorOptions
from actorrt.lifecycle import current_driver
from actorrt.lineage import policies
from actorrt.lineage.policies import Policy
from actorrt.store.relations import save_flow
from actorrt.streaming import savepoints
from actorrt.streaming.connectors import Source, id_kind
from actorrt.streaming.deploy import deploy
from actorrt.streaming.operator import Monitor
from actorrt.streaming.plan import (
    EventTime,
    Fed,
    Input,
    Plan,
    Stage,
    Step,
    check_parallelism,
    pulled,
)
from actorrt.streaming.provenance import check_captured, flow_shape
from actorrt.streaming.running import RunningFlow, RunResult, Watch
from actorrt.streaming.streams import Stream
from actorrt.util import pickling

_monitor = actorrt.remote(Monitor)
# Operators checkpoint after this many tasks by default: a failure replays at most about as many.
DEFAULT_CHECKPOINT_EVERY = 1000
# Record lineage kept per operator instance by default: its newest million records' relations.
DEFAULT_LINEAGE_KEEP = 1_000_000


def stage_policy(ft: Policy | str | None) -> Policy:
    """``ft`` as a stage's policy. Not ``ephemeral``: every operator sends its records on, which
    an actor that keeps no state cannot number again after a failure."""
    policy = policies.policy(ft)
    if policy.kind == "ephemeral":
        raise ValueError("a stage's operators send records on, and an ephemeral actor calls no actor: give the "
                         "stage ft='checkpoint' (its state is its counters, checkpointed often) or 'lineage_stash'")
    return policy


class Dataflow:
    """A dataflow: sources, then stages of operators. Build it, then ``run()`` it, or ``start()``
    it if it is fed (on the cluster of ``actorrt.init()``)."""

    def __init__(self, name: str, *, batch_size: int = 100, max_in_flight: int = 8,
                 checkpoint_every: int | None = DEFAULT_CHECKPOINT_EVERY, standby: int = 0,
                 lineage: bool | Collection[str] = False, lineage_keep: int | None = DEFAULT_LINEAGE_KEEP,
                 ft: Policy | str | None = None) -> None:
        """``batch_size``: records per batch from a source; ``max_in_flight``: batches a producer
        may have unprocessed at each consumer; ``checkpoint_every``: each operator checkpoints after
        that many of its tasks (None: only when asked), which bounds what a failure replays;
        ``standby``: each operator keeps that many standbys (0 or 1) on other nodes, holding its
        newest checkpoint, which take its place when its node fails (``ActorOptions.standby``);
        a stateful stage or a source may say otherwise for its own operators (``standby=``);
        ``lineage``: capture record lineage, of every stage (True) or of the stages named, so that
        ``actorrt.lineage.backward`` and ``forward`` can tell which records an output came from and
        what a record affected (``RunResult.ids`` names the outputs); ``lineage_keep``: each
        operator instance keeps the relations of its newest that many records (None: all);
        ``ft``: the operators' fault-tolerance policy (``ActorOptions.ft``: the lineage stash by
        default, ``"checkpoint"``, ``"eager"``), which a stage may set for its own (``ft=``).
        ``checkpoint_every`` is the lineage stash's cadence; a checkpointing policy has its own."""
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, not {batch_size!r}")
        if not isinstance(max_in_flight, int) or max_in_flight < 1:
            raise ValueError(f"max_in_flight must be an int >= 1, not {max_in_flight!r}")
        self._plan = Plan(name, batch_size=batch_size, max_in_flight=max_in_flight)
        if lineage_keep is not None and (not isinstance(lineage_keep, int) or lineage_keep < 1):
            raise ValueError(f"lineage_keep must be an int >= 1 or None, not {lineage_keep!r}")
        if isinstance(lineage, str) or not isinstance(lineage, (bool, Collection)):
            raise TypeError(f"lineage is True, False, or a collection of stage names, not {lineage!r}")
        self._lineage = lineage if isinstance(lineage, bool) else frozenset(lineage)
        self._plan.lineage_keep = lineage_keep
        self._checkpoint_every = checkpoint_every
        self._standby = ActorOptions(standby=standby).standby  # checked now, not at the run
        self._ft = stage_policy(ft)
        # The actors of the run under way: every stage's instances and the flow's monitor (what a
        # global checkpoint of the flow takes, with ``ft="checkpoint"``).
        self.actors: list[ActorHandle] = []

    def source(self, records: Iterable[Any] | Source | Fed, *, parallelism: int = 1,
               time: EventTime | None = None, name: str | None = None, standby: int | None = None,
               ft: Policy | str | None = None) -> Stream:
        """Records from ``records``: any iterable, read by the driver that runs the flow (each
        batch it sends is logged); a pulled ``Source`` (``RedisStreamSource``, ``ListSource``),
        read by its operator, whose lineage keeps the offsets it read; or ``Fed()``, records
        the driver passes to ``RunningFlow.feed`` as they come (``start()`` runs such a flow).
        A flow may have several sources: each is read on its own, with its own watermark.

        Args:
            parallelism: instances that read the records (the driver's go to them in turn).
            time: ``EventTime(of, max_delay_s, idle_s)``: each record's time is ``of(record)``,
                each instance makes a watermark of what it read, and windows are in event time
                (every source of a flow has one, or none has).
            name: what ``RunningFlow.feed(..., source=)`` calls it (a flow fed from several).
            standby: standbys of each of its instances (0 or 1; None: the flow's).
            ft: its instances' fault-tolerance policy (None: the flow's), as on every stage.
        """
        if time is not None and not isinstance(time, EventTime):
            raise TypeError(f"source(time=) takes EventTime(of, max_delay_s=..., idle_s=...), not {time!r}")
        sources = [self._plan.stages[s] for s in self._plan.sources]
        if sources and (time is None) != (self._plan.time is None):
            raise ValueError("every source of a flow has an event time (time=EventTime(...)), or none has: "
                             "windows and joins run on one kind of time")
        names = {stage.source_name for stage in sources}
        if name in names:
            raise ValueError(f"dataflow {self._plan.name} has a source named {name!r} already")
        name = name or next(f"source{n}" for n in range(len(names) + 1) if f"source{n}" not in names)
        fed = isinstance(records, Fed)
        if any(isinstance(stage.source, Fed) != fed and not pulled(stage.source) for stage in sources) \
                and not pulled(records):
            raise ValueError("a flow's sources the driver gives are all Fed() (start() and feed() them) or all "
                             "iterables (run() reads them); a pulled source goes with either")
        if pulled(records) and parallelism != 1:
            raise ValueError("a pulled source is read by one operator: parallelism=1 (spread the work after it)")
        stage = self._new_stage(parallelism, [], standby, ft)
        stage.source, stage.time, stage.source_name = records, time, name
        return Stream(self, [(len(self._plan.stages) - 1, None)])

    @property
    def plan(self) -> Plan:
        """The logical dataflow as built so far: plain data (stages of steps), what operators run."""
        return self._plan

    @property
    def fed(self) -> bool:
        """Whether a source of the flow is ``Fed()``: its records come through ``RunningFlow.feed``."""
        return any(isinstance(self._plan.stages[s].source, Fed) for s in self._plan.sources)

    def run(self, *, timeout: float | None = None) -> RunResult:
        """Run to the end of the sources; returns what collected streams emitted."""
        if self.fed:
            raise ValueError(f"dataflow {self._plan.name} is fed (source(Fed())): start() it, feed() it records, "
                             f"then finish() it (bridge.stream does, for a Spark streaming query)")
        running = self._start(timeout)
        try:
            running.feed_sources()
            return running.finish()
        except BaseException:
            running.cancel()  # the source's own error ends the run too (a flow's failure stopped it already)
            raise

    def start(self, *, timeout: float | None = None, from_savepoint: str | Path | None = None) -> RunningFlow:
        """Deploy the operators of a flow built on ``source(Fed())`` (or on pulled sources, which
        their operators start reading now); returns the running flow, to ``feed`` and ``finish``
        (or ``stop``).

        Args:
            timeout: seconds the whole run may take, until ``finish()`` returns (None: no limit).
            from_savepoint: a directory ``RunningFlow.stop(savepoint=)`` wrote: the flow goes on
                from the state it saved (its keys spread over this flow's parallelism), and a
                pulled source from where it stopped reading.

        Raises:
            ValueError: the flow has no source, or an iterable one (``run()`` reads that).
            SavepointError: the savepoint is missing, or of a flow with other stages.
        """
        if self._driver_read():
            raise ValueError(f"dataflow {self._plan.name} reads its source(iterable) with run(); build it with "
                             f"source(Fed()) to start() it and feed() it records as they come")
        saved = None if from_savepoint is None else savepoints.read(from_savepoint, self._plan)
        return self._start(timeout, saved)

    def _driver_read(self) -> list[int]:
        """The sources the driver reads (iterables)."""
        return [s for s in self._plan.sources
                if not isinstance(self._plan.stages[s].source, Fed) and not pulled(self._plan.stages[s].source)]

    def _start(self, timeout: float | None,
               savepoint: tuple[list[list[dict[str, Any]]], list[int]] | None = None) -> RunningFlow:
        plan = self._plan
        if not plan.sources:
            raise ValueError(f"dataflow {plan.name} has no source")
        if self._lineage:
            self._start_capture()
        monitor = _monitor.remote()
        stages = deploy(plan, self._plan_blob(), monitor, self._checkpoint_every)
        self.actors = [op for ops in stages for op in ops] + [monitor]
        running = RunningFlow(self, stages, Watch(monitor, timeout))
        if savepoint is not None:
            running._restore(*savepoint)
        running._start_reading()
        return running

    def _plan_blob(self) -> bytes:
        """The plan as operators get it: without the driver's input."""
        plan = self._plan
        read = {s: plan.stages[s].source for s in self._driver_read()}
        for s in read:
            plan.stages[s].source = None
        try:
            return pickling.dumps(plan)
        finally:
            for s, records in read.items():
                plan.stages[s].source = records

    def _start_capture(self) -> None:
        """Name this run in the lineage store and write its shape there, for queries."""
        plan = self._plan
        plan.lineage_stages = None if self._lineage is True else self._lineage
        if plan.lineage_stages is not None:
            unknown = plan.lineage_stages - {stage.name for stage in plan.stages}
            if unknown:
                raise ValueError(f"Dataflow(lineage=) names no stage {sorted(unknown)} of {plan.name}; its stages "
                                 f"are {[stage.name for stage in plan.stages]}")
        plan.lineage = f"{plan.name}.{uuid.uuid4().hex[:12]}"
        try:
            unlogged = [stage.name for s, stage in enumerate(plan.stages)
                        if plan.numbers(s) and not stage.ft.logs_continuously]
            if unlogged:
                raise ValueError(f"record lineage is captured from the lineage stash: stages {unlogged} have "
                                 f"ft= policies that log no lineage as they run")
            check_captured(plan)
            driver = current_driver()
            driver.call(save_flow(lineage_store(), plan.lineage, flow_shape(plan, self._id_kinds())))
        except BaseException:
            plan.lineage = None
            raise

    def _id_kinds(self) -> dict[int, str]:
        kinds = {}
        for s in self._plan.sources:
            source = self._plan.stages[s].source
            kinds[s] = id_kind(source) if pulled(source) else "marked" if isinstance(source, Fed) else "row"
        return kinds

    def _new_stage(self, parallelism: int, inputs: list[Input], standby: int | None = None,
                   ft: Policy | str | None = None) -> Stage:
        standby = self._standby if standby is None else ActorOptions(standby=standby).standby  # checked now
        ft = self._ft if ft is None else stage_policy(ft)
        ActorOptions(standby=standby, ft=ft)  # the two together, checked now
        stage = Stage(check_parallelism(parallelism), inputs, standby=standby, ft=ft)
        self._plan.stages.append(stage)
        return stage

    def _stage_of(self, step: Step, parallelism: int, inputs: list[Input], standby: int | None = None,
                  ft: Policy | str | None = None) -> Stream:
        """A new stage of ``parallelism`` instances taking ``inputs`` into ``step``: its records."""
        self._new_stage(parallelism, inputs, standby, ft).steps.append(step)
        return Stream(self, [(len(self._plan.stages) - 1, 0)])
