"""Where fault tolerance meets the task path: one small interface, one class per mode.

The worker and the actors call these hooks at fixed points of a task's life and never ask which
mode runs; the strategy decides what to stash, write, forward and wait for (paper Figs. 5, 6, 8):

- ``on_submit`` (SubmitTask): a task leaves its sender; returns the lineage to send ahead of it.
- ``on_receive`` / ``on_lineage``: a task, or forwarded lineage, arrived from a peer.
- ``on_result``: a result goes to its owner; returns the lineage to send ahead of it.
- ``on_assign`` (AssignTask): a task is about to run; returns the version that runs.
- ``on_record``: the running task logged a nondeterministic event (a new version of its spec).
- ``flush``: write everything uncommitted and wait (a survivor, during another node's recovery).
- ``commit_lineage``: write a running task's uncommitted lineage and wait (end-to-end exactly-once).

This module holds the interface and the two strategies that log nothing; the logging ones are in
``actorrt.lineage.strategies``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, ClassVar

from actorrt.lineage.options import FaultToleranceMode, FaultToleranceOptions
from actorrt.lineage.policies import Policy
from actorrt.rpc import common_pb2 as pb
from actorrt.rpc import node_pb2
from actorrt.store.lineage_store import LineageStore

Spawn = Callable[[Coroutine[Any, Any, Any]], Any]
Notify = Callable[[str, list[tuple[bytes, int]]], None]  # (peer, [(task id, version committed)])
# To other processes: [(receiver, sender, counter)], every task of the channel up to counter
# committed; returns the processes told.
Announce = Callable[[list[tuple[bytes, bytes, int]]], set[str]]


class FaultTolerance:
    """A process's fault-tolerance strategy. The base logs nothing: every hook is a no-op."""

    mode: ClassVar[FaultToleranceMode]

    def __init__(self, options: FaultToleranceOptions) -> None:
        self.options = options

    @property
    def logs_lineage(self) -> bool:
        """Whether specs reach the lineage store, so a lost actor is rebuilt by replay."""
        return self.mode.logs_lineage

    @property
    def rolls_back(self) -> bool:
        """Whether a failure sends every actor back to the last global checkpoint."""
        return self.mode.rolls_back

    @property
    def store(self) -> LineageStore | None:
        """The lineage store this strategy writes to (None if it logs nothing)."""
        return None

    def start(self, spawn: Spawn, notify: Notify, announce: Announce, address: str) -> None:
        """Start background work (the flusher) with ``spawn``; ``notify`` tells a peer that tasks
        it sent are committed, ``announce`` other processes how far channels into actors here are
        committed; ``address`` is this process's own."""

    async def aclose(self) -> None:
        """Release the store client."""

    # ---- the task path --------------------------------------------------------------------------

    def on_submit(self, spec: pb.TaskSpec, destination: str) -> list[pb.TaskSpec]:
        return []

    def on_receive(self, spec: pb.TaskSpec, source: str) -> None:
        pass

    def on_lineage(self, spec: pb.TaskSpec, source: str) -> None:
        pass

    def on_committed(self, acks: list[tuple[bytes, int]]) -> None:
        """A receiver says the store holds these tasks this process sent it."""

    def on_committed_upto(self, marks: list[tuple[bytes, bytes, int]]) -> None:
        """Receivers say every task of these channels up to these counters is committed."""

    def on_executed(self, spec: pb.TaskSpec, replayed: bool) -> None:
        """An actor here ran ``spec`` (``replayed``: as its replay, from the store)."""

    def on_checkpointed(self, receiver: bytes, covered: dict[bytes, int]) -> None:
        """``receiver``'s checkpoint covers, per sender, its tasks up to a counter."""

    def on_result(self, spec: pb.TaskSpec, owner: str) -> list[pb.TaskSpec]:
        return []

    def on_fetched(self, task_id: bytes, destination: str) -> list[pb.TaskSpec]:
        """An object ``task_id`` made goes to ``destination``: the lineage to send ahead of it."""
        return []

    async def on_assign(self, spec: pb.TaskSpec, predecessor: bytes, record_order: bool) -> pb.TaskSpec:
        return spec

    def on_record(self, spec: pb.TaskSpec) -> None:
        pass

    async def recorded(self, spec: pb.TaskSpec) -> None:
        """Return once ``spec``, a version ``on_record`` took, is as durable as this mode makes a
        task before it runs: at once, except under WriteFirst (acked by the store). For events a
        task awaits, such as a collective call."""

    # ---- commits ----------------------------------------------------------------------------------

    async def flush(self) -> int:
        """Write every uncommitted spec and wait for the acks; returns how many."""
        return 0

    async def commit_lineage(self, task_id: bytes) -> int:
        """Write the running task ``task_id`` and its uncommitted lineage, and wait; returns how many."""
        return 0

    async def register_actor(self, slot: int, actor_id: bytes) -> None:
        """Record where an actor lives before it runs (a restarted slot looks it up)."""

    def hosts(self, actor_id: bytes, policy: Policy) -> None:
        """An actor of ``policy`` lives in this process from now on (its tasks are logged as
        the policy says)."""

    # ---- back-pressure ----------------------------------------------------------------------------

    def has_room(self, queued: int) -> bool:
        """Whether a submitter may add a task, with ``queued`` more on their way to the stash."""
        return True

    @property
    def over_limit(self) -> bool:
        return False

    async def wait_below_limit(self) -> None:
        """Returns once the stash is under its bound."""

    def stats(self) -> node_pb2.LineageStats:
        return node_pb2.LineageStats()


class NoLogging(FaultTolerance):
    """``ft="none"``: nothing is logged and nothing is recovered."""

    mode = FaultToleranceMode.NONE


class GlobalRollback(FaultTolerance):
    """``ft="checkpoint"`` and ``ft="global_rollback"``: nothing is logged; when a node fails, it
    and the nodes the rollback frontier names restart and their actors restore their part of the
    last global checkpoint, while the others run on (``cluster/rollback_round.py``). Under
    ``global_rollback`` (the Flink-style baseline), or where the frontier cannot tell, every node
    does: a driver's tasks in flight fail with RolledBackError and the application resumes from
    there. The head decides which; a process acts the same in both."""

    mode = FaultToleranceMode.CHECKPOINT

    def __init__(self, options: FaultToleranceOptions) -> None:
        super().__init__(options)
        self.mode = options.mode  # (either: the head alone acts on the difference)
