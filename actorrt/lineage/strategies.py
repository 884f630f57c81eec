"""The strategies that log lineage, and the choice of a strategy for a mode.

- ``LineageStash``: stash on submit; forward the uncommitted lineage a receiver has not been sent;
  on assign, a receiver records its execution order (new ``predecessor_id``, version bump) and
  writes only that change, a small delta: a nondeterministic receiver for every task, a
  deterministic one where its senders interleave. Every process writes what it stashes,
  asynchronously, except a submitter the task it sends to another process: its receiver writes
  it (with the lineage that came along, in one atomic batch) and tells the submitter once the
  store has it, or checkpoints past it. A submitter that hears neither within
  ``UNCONFIRMED_WRITE_S`` writes the task itself. Nothing waits on the store, except submission
  when the stash is over its bound.
- ``WriteFirst``: the baseline: before a task runs its spec is written and the ack awaited; a
  receiver then writes and awaits its execution order too, where it records one.

Under the lineage stash an actor may choose another policy (``lineage/policies.py``): the tasks of
a checkpointing actor are stashed and not written (its checkpoint covers them, or an escape writes
them with ``commit_lineage``); those of an ephemeral actor are neither stashed nor written, and
their senders hear at once that no record is needed.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import time
from collections.abc import Callable

from actorrt.lineage.commit_marks import CommitMarks, Mark
from actorrt.lineage.flusher import Ack, Flusher
from actorrt.lineage.options import FaultToleranceMode, FaultToleranceOptions
from actorrt.lineage.policies import Policy
from actorrt.lineage.stash import Stash
from actorrt.lineage.strategy import Announce, FaultTolerance, GlobalRollback, NoLogging, Notify, Spawn
from actorrt.rpc import common_pb2 as pb
from actorrt.rpc import node_pb2
from actorrt.store.clients import until_reachable
from actorrt.store.lineage_store import LineageStore

log = logging.getLogger(__name__)

# A submitter writes a task it sent if its receiver has not said the store has it by then: a
# backstop, since a receiver that dies makes the survivors (the submitter among them) flush what
# they hold, and the notice normally comes within milliseconds. Long, because a late write of a
# task its receiver has checkpointed past and collected would bring its record back.
UNCONFIRMED_WRITE_S = 30.0
# The lineage stash's flushes wait this long for more specs to write in the same round trip (no
# task waits on them; WriteFirst's do not wait). A round trip costs the writing process ~0.6 ms of
# CPU on a 2-core VM, mostly the wakeups around it, against ~16 µs a spec: at 3 ms a ring hop paid
# ~45 µs more CPU (node and store) than at 10 ms. Commit marks keep the lineage that travels
# meanwhile short.
FLUSH_LINGER_S = 0.01
# An actor waiting for room in a full stash says so this often.
STASH_FULL_WARNING_S = 10.0


def reordered(spec: pb.TaskSpec, predecessor: bytes) -> pb.TaskSpec:
    """``spec`` as executed right after ``predecessor`` (AssignTask, where the order is recorded)."""
    out = pb.TaskSpec()
    out.CopyFrom(spec)
    out.predecessor_id = predecessor
    out.dependencies[1] = predecessor  # dependencies = [parent_id, predecessor_id] + producers
    out.version = spec.version + 1
    return out


class LoggedLineage(FaultTolerance):
    """What both logging strategies share: a stash, its flusher and store, acks, back-pressure."""

    def __init__(self, options: FaultToleranceOptions, store: LineageStore) -> None:
        super().__init__(options)
        self.stash = Stash(options.max_forwards)
        self._store = store
        self.flusher = Flusher(store, self._on_acks, options.store_delay_ms / 1e3,
                               lambda spec: self.stash.committed_version(spec.task_id) < spec.version)
        self._below_limit = asyncio.Event()
        self._below_limit.set()

    @property
    def store(self) -> LineageStore:
        return self._store

    def start(self, spawn: Spawn, notify: Notify, announce: Announce, address: str) -> None:
        spawn(self.flusher.run())

    async def aclose(self) -> None:
        await self._store.aclose()

    def _stash(self, spec: pb.TaskSpec, source: str | None = None, whole: bool = True) -> None:
        """Stash ``spec`` and write it: whole, or only what its version changes."""
        if self.stash.add(spec, source):
            self.flusher.flush(spec, whole)
            self._check_limit()

    def _check_limit(self) -> None:
        if len(self.stash) > self.options.stash_limit:
            self._below_limit.clear()

    def _on_acks(self, acks: list[Ack]) -> None:
        for task_id, version in acks:
            if version < 0:  # a version written where its spec is not: write the spec too
                if (spec := self.stash.get(task_id)) is not None:
                    self.flusher.flush(spec, whole=True)
                continue
            self.stash.ack(task_id, version)
        if self.over_limit and len(self.stash) <= self.options.stash_limit * 0.9:
            self._below_limit.set()

    def on_record(self, spec: pb.TaskSpec) -> None:
        self._keep(spec, whole=False)

    def _keep(self, spec: pb.TaskSpec, source: str | None = None, whole: bool = True) -> None:
        self._stash(spec, source, whole)

    async def flush(self) -> int:
        specs = self.stash.uncommitted()
        if specs:
            await self.flusher.write_now(specs)
        return len(specs)

    async def write_relations(self) -> None:
        """Write the record lineage queued so far, after the lineage of every task not yet
        committed (before a checkpoint that covers them, or a sink's commit), and after a write of
        relations under way."""
        if not self.flusher.relates:
            return  # (nothing here ever related a record: no round trip)
        relations = self.flusher.relations
        if relations:  # (queued, or taken by the flusher and not written yet)
            await self.flush()
        await relations.drain()

    async def register_actor(self, slot: int, actor_id: bytes) -> None:
        # The actor waits for the store: unregistered, a restart of its slot would not rebuild it.
        await until_reachable(f"registering actor {actor_id.hex()[:8]}", self._store.register_actor, slot, actor_id)

    @property
    def over_limit(self) -> bool:
        return not self._below_limit.is_set()

    async def wait_below_limit(self) -> None:
        while True:
            try:
                async with asyncio.timeout(STASH_FULL_WARNING_S):
                    await self._below_limit.wait()
                    return
            except TimeoutError:
                log.warning("the lineage stash is full (%d specs, stash_limit %d) and the lineage store has not "
                            "committed enough of it for %.0f s: actors here wait to run tasks; is the store reachable?",
                            len(self.stash), self.options.stash_limit, STASH_FULL_WARNING_S)

    def stats(self) -> node_pb2.LineageStats:
        sizes = self.stash.forwarded_sizes
        f = self.flusher
        return node_pb2.LineageStats(
            stash_size=len(self.stash),
            flushed=f.flushed,
            committed=f.committed,
            evicted=self.stash.evicted,
            forwarded_mean=statistics.fmean(sizes) if sizes else 0.0,
            forwarded_median=statistics.median(sizes) if sizes else 0.0,
            store_latency_ms_p50=f.latency_p50_ms(),
            store_latency_ms_mean=f.latency_mean_ms(),
            store_bytes_written=self._store.bytes_written,
            refused=f.refused,
            store_writes=f.writes,
        )


class LineageStash(LoggedLineage):
    """``ft="lineage_stash"``: the paper's protocol (§4.2)."""

    mode = FaultToleranceMode.LINEAGE_STASH

    def __init__(self, options: FaultToleranceOptions, store: LineageStore) -> None:
        super().__init__(options, store)
        self.flusher.linger_s = FLUSH_LINGER_S
        self._notify: Notify = lambda peer, acks: None
        self._address = ""
        self._announce: Announce = lambda marks: set()
        self._marks_reach: set[str] = set()  # the processes marks go to
        # task id -> its channel and counter, and the submitters waiting to hear it committed
        self._to_tell: dict[bytes, tuple[bytes, bytes, int, list[str]]] = {}
        self._unconfirmed: dict[bytes, float] = {}  # task id -> when to write it here, oldest first
        self.marks = CommitMarks(self.stash.committed_version)  # of the channels into actors here
        self._marks_due = False  # a look at them is scheduled for the end of this loop turn
        self._deferred: set[bytes] = set()  # checkpointing actors here: their tasks are not written as they run
        self._unlogged: set[bytes] = set()  # ephemeral actors here: their tasks are not even stashed

    def hosts(self, actor_id: bytes, policy: Policy) -> None:
        if policy.kind == "ephemeral":
            self._unlogged.add(actor_id)
        elif not policy.logs_continuously:
            self._deferred.add(actor_id)

    def _keep(self, spec: pb.TaskSpec, source: str | None = None, whole: bool = True) -> None:
        """Stash ``spec`` and write it, unless its receiver defers its writes (then only stash it)."""
        if spec.receiver in self._deferred:
            if self.stash.add(spec, source):
                self._check_limit()
        elif spec.receiver not in self._unlogged:
            self._stash(spec, source, whole)

    def start(self, spawn: Spawn, notify: Notify, announce: Announce, address: str) -> None:
        super().start(spawn, notify, announce, address)
        self._notify, self._announce, self._address = notify, announce, address
        spawn(self._write_unconfirmed())

    def on_submit(self, spec: pb.TaskSpec, destination: str) -> list[pb.TaskSpec]:
        """Stash ``spec``; returns the lineage to send ahead of it to ``destination``.

        Lineage goes to deterministic receivers too: if the sender fails, its replay must
        reproduce this task, and the execution order that made it may be committed nowhere else.
        The receiver writes the task (in the same atomic batch as that lineage, so the store never
        holds it without the lineage); this process writes it only if it runs it itself.
        """
        if destination and destination != self._address:
            if self.stash.add(spec):
                self._unconfirmed[spec.task_id] = time.monotonic() + UNCONFIRMED_WRITE_S
                self._check_limit()
        else:
            self._keep(spec)
        lineage = self.stash.lineage_for(spec, destination)
        self.stash.mark_sent(spec.task_id, destination)  # the receiver stashes the task on arrival
        return lineage

    def on_receive(self, spec: pb.TaskSpec, source: str) -> None:
        """Stashed now, not when it runs: its sender counts it as held here from now on, and a
        result may soon bring lineage that depends on it. Written here; the sender hears when the
        store has it. For a checkpointing actor here, when its checkpoint covers it (or an escape
        writes it); for an ephemeral one, at once: nothing needs it."""
        if spec.receiver in self._unlogged:
            self._notify(source, [(spec.task_id, spec.version)])
            return
        if spec.receiver in self._deferred:
            self._keep(spec, source)
            return
        self._stash(spec, source)
        committed = self.stash.committed_version(spec.task_id)
        if committed < 0 and self.stash.marked(spec):  # a re-send of a task a mark covers
            committed = spec.version
        if committed >= 0:
            self._notify(source, [(spec.task_id, committed)])
        elif (told := self._to_tell.get(spec.task_id)) is not None:
            told[3].append(source)
        else:
            self._to_tell[spec.task_id] = (spec.receiver, spec.sender, spec.task_counter, [source])

    def _on_acks(self, acks: list[Ack]) -> None:
        super()._on_acks(acks)
        self._look_at_marks()
        notices: dict[str, list[Ack]] = {}
        for task_id, version in acks:
            if version >= 0 and task_id in self._to_tell:  # any version: the sender holds version 0
                receiver, sender, counter, sources = self._to_tell.pop(task_id)
                covered = self.marks.covers((receiver, sender), counter)
                for source in sources:
                    if not (covered and source in self._marks_reach):  # (a mark tells it)
                        notices.setdefault(source, []).append((task_id, version))
        for source, committed in notices.items():
            self._notify(source, committed)

    def on_executed(self, spec: pb.TaskSpec, replayed: bool) -> None:
        """``spec`` ran here: its version is final once the store holds it. A replayed task ran as
        the store has it, unless its log ran out and it recorded afresh: that version is stashed."""
        if spec.receiver in self._deferred or spec.receiver in self._unlogged:
            return  # its channels are committed by its checkpoints, not by the store's acks
        stashed = self.stash.get(spec.task_id)
        if stashed is not None:
            version = stashed.version
        else:
            version = -1 if replayed else self.stash.committed_version(spec.task_id)
        self.marks.ran((spec.receiver, spec.sender), spec.task_counter, spec.task_id, version)
        # Usually its write is still on its way, and its ack looks at the marks; one that came
        # first (a long task) has the marks looked at once per loop turn, however many ran in it.
        if not self._marks_due and self.stash.committed_version(spec.task_id) >= version:
            self._marks_due = True
            asyncio.get_running_loop().call_soon(self._look_at_marks)

    def _look_at_marks(self) -> None:
        """Announce the channels whose committed prefix grew (and apply them here)."""
        self._marks_due = False
        marks = self.marks.advance()
        if marks:
            self.on_committed_upto(marks)
            self._marks_reach = self._announce(marks)

    def on_committed(self, acks: list[Ack]) -> None:
        self._committed_elsewhere(acks)

    def on_committed_upto(self, marks: list[Mark]) -> None:
        for receiver, sender, counter in marks:
            for task_id in self.stash.committed_upto(receiver, sender, counter):
                self._unconfirmed.pop(task_id, None)
        if self.over_limit and len(self.stash) <= self.options.stash_limit * 0.9:
            self._below_limit.set()

    def _committed_elsewhere(self, acks: list[Ack]) -> None:
        """Tasks this process did not write are committed (a receiver wrote them, or checkpointed
        past them): no notice to send for them, and no backstop write."""
        for task_id, _ in acks:
            self._unconfirmed.pop(task_id, None)
        super()._on_acks(acks)

    def on_checkpointed(self, receiver: bytes, covered: dict[bytes, int]) -> None:
        """A receiver's replay starts after its checkpoint, so the tasks it covers need no record
        any more: those stashed here count as committed, and writes of them still queued are
        dropped. (A late write would land in this process's slot group after the collector
        deleted the other copies, and bring the record back for good.)"""
        self._committed_elsewhere(self.stash.covered(receiver, covered))

    async def _write_unconfirmed(self) -> None:
        while True:
            await asyncio.sleep(UNCONFIRMED_WRITE_S / 4)
            now = time.monotonic()
            while self._unconfirmed:
                task_id, due = next(iter(self._unconfirmed.items()))
                if due > now:
                    break
                del self._unconfirmed[task_id]
                spec = self.stash.get(task_id)
                if spec is not None and not self.stash.is_committed(task_id):
                    self.flusher.flush(spec)

    def on_lineage(self, spec: pb.TaskSpec, source: str) -> None:
        self._stash(spec, source)

    def on_result(self, spec: pb.TaskSpec, owner: str) -> list[pb.TaskSpec]:
        """The owner depends on the version that ran (a nondeterministic receiver's order) once it
        passes the value on, so that version goes ahead of the result. Not for a checkpointing or
        ephemeral actor's: its caller keeps the call and sends it again instead (a result with a
        value leaves such an actor once its lineage is written, and then there is nothing to send)."""
        if spec.receiver in self._deferred or spec.receiver in self._unlogged:
            return []
        return self.stash.lineage_for(spec, owner, include_self=True)

    def on_fetched(self, task_id: bytes, destination: str) -> list[pb.TaskSpec]:
        """Like a result: whoever uses the object depends on the version of the task that made it."""
        spec = self.stash.get(task_id)
        return self.on_result(spec, destination) if spec is not None else []

    async def on_assign(self, spec: pb.TaskSpec, predecessor: bytes, record_order: bool) -> pb.TaskSpec:
        # A nondeterministic receiver records the order of every execution, a deterministic one
        # where it goes from one sender's task to another's: replay follows these records, so a
        # task whose order was to be recorded and was not is one nobody can depend on.
        if spec.receiver in self._unlogged:
            return spec
        if record_order and predecessor:
            spec = reordered(spec, predecessor)
            self._keep(spec, whole=False)  # a new version (the spec is written already): the change only
        elif spec.task_id not in self.stash:
            self._keep(spec)  # a local submission
        return spec

    async def commit_lineage(self, task_id: bytes) -> int:
        """Afterwards a replay reproduces this task at this point of its actor's order, so what it
        then emits will be emitted identically (paper §4.3)."""
        spec = self.stash.get(task_id)
        if spec is None:
            return 0  # evicted: committed already
        specs = [s for s in [spec, *self.stash.uncommitted_lineage(spec)] if not self.stash.is_committed(s.task_id)]
        if specs:
            await self.flusher.write_now(specs)
        return len(specs)

    def has_room(self, queued: int) -> bool:
        return len(self.stash) + queued < self.options.stash_limit


class WriteFirst(LoggedLineage):
    """``ft="write_first"``: the baseline that logs every spec before its task runs."""

    mode = FaultToleranceMode.WRITE_FIRST

    async def recorded(self, spec: pb.TaskSpec) -> None:
        await self.flusher.write_now([spec], whole=False)

    async def on_assign(self, spec: pb.TaskSpec, predecessor: bytes, record_order: bool) -> pb.TaskSpec:
        if record_order and predecessor:
            first, spec = spec, reordered(spec, predecessor)
            await self.flusher.write_now([first])
            await self.flusher.write_now([spec], whole=False)  # only what the new version changes
        else:
            await self.flusher.write_now([spec])
        return spec


def create_strategy(options: FaultToleranceOptions, open_store: Callable[[], LineageStore]) -> FaultTolerance:
    """The strategy for ``options.mode``; ``open_store`` is called only by the ones that log."""
    if options.mode is FaultToleranceMode.LINEAGE_STASH:
        return LineageStash(options, open_store())
    if options.mode is FaultToleranceMode.WRITE_FIRST:
        return WriteFirst(options, open_store())
    if options.mode.rolls_back:
        return GlobalRollback(options)
    return NoLogging(options)
