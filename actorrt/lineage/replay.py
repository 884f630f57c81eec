"""Rebuilding a lost actor: which of its tasks to re-execute, and in which order (paper §4.2.3).

Pure protocol logic over the specs the lineage store holds for the actor (every task sent to it,
newest versions) and its newest checkpoint, so it is tested without sockets. Replay starts at the
checkpoint (or at the constructor if there is none):

- a nondeterministic actor recorded the order it ran its tasks in (each executed task's newest
  version names the task before it as ``predecessor_id``): replay follows that chain from the last
  task before the checkpoint and stops where the record ends; tasks after that were seen by
  nobody, and their senders send them again;
- a deterministic actor runs each sender's tasks in counter order, and recorded only where it
  went from one sender's task to another's (that task's newest version names the task before
  it): replay goes on with the same sender's next counter unless such a record says otherwise,
  and stops, like the chain above, at the first task whose order the store lacks. With one sender nothing is
  recorded at all; with several, their interleaving comes back exactly.
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
        start, start_sender = checkpoint.last_executed, checkpoint.last_sender
        done = {p.sender: p.last_counter for p in checkpoint.senders}
        nondeterministic = checkpoint.creation.nondeterministic
        order: list[pb.TaskSpec] = []
    else:
        creation = next((s for s in specs.values() if s.HasField("actor_creation")), None)
        if creation is None:
            raise ActorRTError(f"the lineage store has no constructor for actor {ids.short(actor_id)}")
        start, start_sender = creation.task_id, creation.sender
        done = {creation.sender: creation.task_counter}
        nondeterministic = creation.actor_creation.nondeterministic
        order = [creation]
    if nondeterministic:
        return order + _recorded_chain(start, specs)
    return order + _sender_runs(start, start_sender, done, specs)


def _recorded_chain(start: bytes, specs: Mapping[bytes, pb.TaskSpec]) -> list[pb.TaskSpec]:
    after = {s.predecessor_id: s for s in specs.values() if s.version >= 1 and not s.HasField("actor_creation")}
    order: list[pb.TaskSpec] = []
    while (nxt := after.get(order[-1].task_id if order else start)) is not None:
        order.append(nxt)
    return order


def _sender_runs(start: bytes, start_sender: bytes, done: Mapping[bytes, int],
                 specs: Mapping[bytes, pb.TaskSpec]) -> list[pb.TaskSpec]:
    switches = {s.predecessor_id: s for s in specs.values() if s.version >= 1 and not s.HasField("actor_creation")}
    by_counter = {(s.sender, s.task_counter): s for s in specs.values()}
    ran = dict(done)  # per sender, the last counter run so far
    order: list[pb.TaskSpec] = []
    last, sender = start, start_sender
    while True:
        nxt = switches.get(last) or by_counter.get((sender, ran.get(sender, 0) + 1))
        # The next task of the same sender names ``last`` as its predecessor too, unless it ran
        # after another sender's task (a record says so) and the record of what ran here is lost.
        if nxt is None or nxt.predecessor_id != last or nxt.task_counter != ran.get(nxt.sender, 0) + 1:
            return order
        order.append(nxt)
        ran[nxt.sender] = nxt.task_counter
        last, sender = nxt.task_id, nxt.sender
