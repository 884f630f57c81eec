"""Rebuilding a lost actor: which of its tasks to re-execute, and in which order (paper §4.2.3).

Pure protocol logic over the specs the lineage store holds for the actor (every task sent to it,
newest versions) and its newest checkpoint, so it is tested without sockets. Replay starts at the
checkpoint (or at the constructor if there is none):

- a nondeterministic actor recorded the order it ran its tasks in (each executed task's newest
  version names the task before it as ``predecessor_id``): replay follows that chain from the last
  task before the checkpoint and stops where the record ends; tasks after that were seen by
  nobody, and their senders send them again;
- a deterministic actor runs each sender's tasks in counter order, so replay runs, per sender,
  the unbroken run of counters after the checkpoint's (a gap means a task the store never got: it
  and everything after it from that sender come again from the sender).
"""

from __future__ import annotations

from collections.abc import Mapping

from actorrt.exceptions import ActorRTError
from actorrt.lineage import ids
from actorrt.rpc import checkpoint_pb2
from actorrt.rpc import common_pb2 as pb


def replay_order(actor_id: bytes, specs: Mapping[bytes, pb.TaskSpec],
                 checkpoint: checkpoint_pb2.ActorCheckpoint | None = None) -> list[pb.TaskSpec]:
    """The tasks to re-execute on ``actor_id`` restored from ``checkpoint``; with no checkpoint,
    on a fresh instance, constructor first."""
    if checkpoint is not None:
        start = checkpoint.last_executed
        done = {p.sender: p.last_counter for p in checkpoint.senders}
        nondeterministic = checkpoint.creation.nondeterministic
        order: list[pb.TaskSpec] = []
    else:
        creation = next((s for s in specs.values() if s.HasField("actor_creation")), None)
        if creation is None:
            raise ActorRTError(f"the lineage store has no constructor for actor {ids.short(actor_id)}")
        start, done = creation.task_id, {creation.sender: creation.task_counter}
        nondeterministic = creation.actor_creation.nondeterministic
        order = [creation]
    if nondeterministic:
        return order + _recorded_chain(start, specs)
    return order + _per_sender_runs(done, specs)


def _recorded_chain(start: bytes, specs: Mapping[bytes, pb.TaskSpec]) -> list[pb.TaskSpec]:
    after = {s.predecessor_id: s for s in specs.values() if s.version >= 1 and not s.HasField("actor_creation")}
    order: list[pb.TaskSpec] = []
    while (nxt := after.get(order[-1].task_id if order else start)) is not None:
        order.append(nxt)
    return order


def _per_sender_runs(done: Mapping[bytes, int], specs: Mapping[bytes, pb.TaskSpec]) -> list[pb.TaskSpec]:
    by_sender: dict[bytes, dict[int, pb.TaskSpec]] = {}
    for spec in specs.values():
        by_sender.setdefault(spec.sender, {})[spec.task_counter] = spec
    runs = []
    for sender, tasks in by_sender.items():
        counter = done.get(sender, 0) + 1
        while counter in tasks:
            runs.append(tasks[counter])
            counter += 1
    # Senders interleave in counter order; a deterministic actor does not depend on how.
    runs.sort(key=lambda s: (s.task_counter, s.sender))
    return runs
