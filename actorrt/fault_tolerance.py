"""Where the lineage stash meets the task path: SubmitTask, AssignTask, acks (paper Figs. 5, 6, 8).

The worker calls these hooks; they decide what to stash, flush, forward and wait for, so the
protocol stays out of the transport. Modes:

- ``lineage_stash``: stash and flush asynchronously on submit; forward the uncommitted lineage a
  nondeterministic receiver has not been sent; on assign, a nondeterministic receiver records its
  execution order (new ``predecessor_id``, version bump) and flushes again. Nothing waits on the
  store, except submission when the stash is over its bound (back-pressure).
- ``write_first``: the baseline: before a task runs its spec is written and the ack awaited; a
  nondeterministic receiver then writes and awaits its execution order too.
- ``checkpoint``: the global-rollback baseline (Flink-style): no logging; when any node fails,
  every node restarts and every actor restores its part of the last global checkpoint
  (``actorrt.checkpoint``); tasks in flight fail with RolledBackError and the application
  resumes from that checkpoint.
- ``none``: no logging and no recovery.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
from dataclasses import dataclass

from actorrt.exceptions import ClusterError
from actorrt.flusher import Ack, Flusher
from actorrt.rpc import common_pb2 as pb
from actorrt.rpc import head_pb2, node_pb2
from actorrt.stash import Stash

log = logging.getLogger(__name__)

MODES = ("lineage_stash", "write_first", "checkpoint", "none")
LOGGING_MODES = ("lineage_stash", "write_first")
# Submission waits while the stash holds more specs than this (the store is slow or down).
DEFAULT_STASH_LIMIT = 200_000


@dataclass(frozen=True)
class FaultToleranceOptions:
    """How the cluster logs lineage (``actorrt.init(ft=..., store_delay_ms=..., max_forwards=...)``)
    and where actors write checkpoints (empty: the head's session directory)."""

    mode: str = "lineage_stash"
    store_delay_ms: float = 0.0
    max_forwards: int | None = None
    stash_limit: int = DEFAULT_STASH_LIMIT
    checkpoint_dir: str = ""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"ft must be one of {', '.join(MODES)}, not {self.mode!r}")
        if not isinstance(self.store_delay_ms, int | float) or self.store_delay_ms < 0:
            raise ValueError(f"store_delay_ms must be a number >= 0, not {self.store_delay_ms!r}")
        if self.max_forwards is not None and (not isinstance(self.max_forwards, int) or self.max_forwards < 0):
            raise ValueError(f"max_forwards must be an int >= 0 or None, not {self.max_forwards!r}")
        if not isinstance(self.stash_limit, int) or self.stash_limit < 1:
            raise ValueError(f"stash_limit must be an int >= 1, not {self.stash_limit!r}")

    def to_proto(self) -> head_pb2.FaultTolerance:
        return head_pb2.FaultTolerance(
            mode=self.mode, store_delay_ms=self.store_delay_ms,
            max_forwards=-1 if self.max_forwards is None else self.max_forwards,
            stash_limit=self.stash_limit, checkpoint_dir=self.checkpoint_dir,
        )

    @classmethod
    def from_proto(cls, proto: head_pb2.FaultTolerance) -> FaultToleranceOptions:
        return cls(proto.mode or "lineage_stash", proto.store_delay_ms,
                   None if proto.max_forwards < 0 else proto.max_forwards,
                   proto.stash_limit or DEFAULT_STASH_LIMIT, proto.checkpoint_dir)


def reordered(spec: pb.TaskSpec, predecessor: bytes) -> pb.TaskSpec:
    """``spec`` as executed right after ``predecessor`` (AssignTask at a nondeterministic receiver)."""
    out = pb.TaskSpec()
    out.CopyFrom(spec)
    out.predecessor_id = predecessor
    out.dependencies[1] = predecessor  # dependencies = [parent_id, predecessor_id] + producers
    out.version = spec.version + 1
    return out


class FaultTolerance:
    """One process's lineage logging: its stash, its flusher, and the hooks of the task path."""

    def __init__(self, options: FaultToleranceOptions, flusher: Flusher | None) -> None:
        self.options = options
        self.mode = options.mode
        self.stash = Stash(options.max_forwards)
        self.flusher = flusher
        self._below_limit = asyncio.Event()
        self._below_limit.set()

    @classmethod
    def create(cls, options: FaultToleranceOptions, store) -> FaultTolerance:
        """With ``store`` a LineageStore (None for mode ``none``); the caller runs ``flusher.run()``."""
        ft = cls(options, None)
        if options.mode in LOGGING_MODES:
            ft.flusher = Flusher(store, ft.on_acks, options.store_delay_ms / 1e3)
        return ft

    # ---- SubmitTask -------------------------------------------------------------------------------

    def on_submit(self, spec: pb.TaskSpec, destination: str) -> list[pb.TaskSpec]:
        """Stash and flush ``spec``; returns the lineage to send ahead of it to ``destination``.

        Lineage goes to deterministic receivers too: if the sender fails, its replay must
        reproduce this task, and the execution order that made it may be committed nowhere else.
        """
        if self.mode != "lineage_stash":
            return []
        self._stash(spec)
        lineage = self.stash.lineage_for(spec, destination)
        self.stash.mark_sent(spec.task_id, destination)  # the receiver stashes the task on arrival
        return lineage

    def on_result(self, spec: pb.TaskSpec, owner: str) -> list[pb.TaskSpec]:
        """A result goes to ``owner``: the lineage to send ahead of it. The owner depends on the
        version that ran (a nondeterministic receiver's order) once it passes the value on."""
        if self.mode != "lineage_stash":
            return []
        return self.stash.lineage_for(spec, owner, include_self=True)

    def on_lineage(self, spec: pb.TaskSpec, source: str) -> None:
        """Forwarded lineage arrived from ``source`` (ahead of the task it belongs to)."""
        if self.mode == "lineage_stash":
            self._stash(spec, source)

    def on_receive(self, spec: pb.TaskSpec, source: str) -> None:
        """A task arrived from ``source``. It is stashed now, not when it runs: its sender counts it
        as held here from now on, and a result may soon bring lineage that depends on it."""
        if self.mode == "lineage_stash":
            self._stash(spec, source)

    def _stash(self, spec: pb.TaskSpec, source: str | None = None) -> None:
        if self.stash.add(spec, source):
            self.flusher.flush(spec)
            if len(self.stash) > self.options.stash_limit:
                self._below_limit.clear()

    async def wait_below_limit(self) -> None:
        """Back-pressure: returns once the stash is under its bound."""
        await self._below_limit.wait()

    @property
    def over_limit(self) -> bool:
        return not self._below_limit.is_set()

    # ---- AssignTask -------------------------------------------------------------------------------

    async def on_assign(self, spec: pb.TaskSpec, predecessor: bytes, nondeterministic: bool) -> pb.TaskSpec:
        """Before ``spec`` runs; ``predecessor`` is the task its actor executed just before.
        Returns the version of the spec that runs."""
        if self.mode not in LOGGING_MODES:
            return spec
        if nondeterministic and predecessor:
            # Every execution records its order, reordered or not: replay follows this chain, so a
            # task without a new version is one whose order nobody can depend on.
            first, spec = spec, reordered(spec, predecessor)
        else:
            first = None
        if self.mode == "write_first":
            if first is not None:
                await self.flusher.write_now([first])
            await self.flusher.write_now([spec])
        elif first is not None or spec.task_id not in self.stash:
            self._stash(spec)  # a new version (the sender has the old one only), or a local submission
        return spec

    def on_record(self, spec: pb.TaskSpec) -> None:
        """The running task logged a nondeterministic event: ``spec`` is its new version."""
        if self.mode in LOGGING_MODES:
            self._stash(spec)

    # ---- recovery -----------------------------------------------------------------------------------

    async def flush_stash(self) -> int:
        """Write every uncommitted spec in the stash and wait for the acks; returns how many."""
        specs = [s for s in self.stash.specs() if not self.stash.is_committed(s.task_id)]
        if specs and self.flusher is not None:
            await self.flusher.write_now(specs)
        return len(specs)

    async def commit_lineage(self, task_id: bytes) -> int:
        """End-to-end exactly-once (paper §4.3): write the running task ``task_id`` and its
        uncommitted lineage, and wait for the acks. Afterwards a replay reproduces this task at
        this point of its actor's order, so what it then emits will be emitted identically.
        Returns how many specs were written."""
        spec = self.stash.get(task_id) if self.mode == "lineage_stash" else None
        if spec is None:
            return 0  # committed before it ran (write_first), evicted (committed), or not logged (none)
        specs = [s for s in [spec, *self.stash.uncommitted_lineage(spec)] if not self.stash.is_committed(s.task_id)]
        if specs:
            await self.flusher.write_now(specs)
        return len(specs)

    async def register_actor(self, slot: int, actor_id: bytes) -> None:
        """Record where an actor lives before it runs (a restarted slot looks it up)."""
        if self.flusher is None:
            return
        try:
            await self.flusher.store.register_actor(slot, actor_id)
        except ClusterError as exc:
            log.error("actor %s runs unregistered and cannot be recovered: %s", actor_id.hex()[:8], exc)

    # ---- acks ---------------------------------------------------------------------------------------

    def on_acks(self, acks: list[Ack]) -> None:
        for task_id, version in acks:
            self.stash.ack(task_id, version)
        if self.over_limit and len(self.stash) <= self.options.stash_limit * 0.9:
            self._below_limit.set()

    def stats(self) -> node_pb2.LineageStats:
        sizes = self.stash.forwarded_sizes
        f = self.flusher
        return node_pb2.LineageStats(
            stash_size=len(self.stash),
            flushed=f.flushed if f else 0,
            committed=f.committed if f else 0,
            evicted=self.stash.evicted,
            forwarded_mean=statistics.fmean(sizes) if sizes else 0.0,
            forwarded_median=statistics.median(sizes) if sizes else 0.0,
            store_latency_ms_p50=f.latency_p50_ms() if f else 0.0,
            store_latency_ms_mean=f.latency_mean_ms() if f else 0.0,
        )
