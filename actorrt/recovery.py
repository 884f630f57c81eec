"""Rebuilding a lost actor: which of its tasks to re-execute, and in which order (paper §4.2.3).

Pure protocol logic over the specs the lineage store holds for the actor (every task sent to it,
newest versions), so it is tested without sockets:

- a nondeterministic actor recorded the order it ran its tasks in (each executed task's newest
  version names the task before it as ``predecessor_id``): replay follows that chain from the
  constructor and stops where the record ends; tasks after that were seen by nobody, and their
  senders send them again;
- a deterministic actor runs each sender's tasks in counter order, so replay runs, per sender,
  the unbroken run of counters from the first (a gap means a task the store never got: it and
  everything after it from that sender come again from the sender).
"""

from __future__ import annotations

from collections.abc import Mapping

from actorrt.exceptions import ActorRTError
from actorrt.rpc import common_pb2 as pb


def replay_order(actor_id: bytes, specs: Mapping[bytes, pb.TaskSpec]) -> list[pb.TaskSpec]:
    """The tasks to re-execute on a fresh instance of ``actor_id``, constructor first."""
    creation = next((s for s in specs.values() if s.HasField("actor_creation")), None)
    if creation is None:
        raise ActorRTError(f"the lineage store has no constructor for actor {actor_id.hex()[:8]}")
    if creation.actor_creation.nondeterministic:
        return _recorded_chain(creation, specs)
    return _per_sender_runs(creation, specs)


def _recorded_chain(creation: pb.TaskSpec, specs: Mapping[bytes, pb.TaskSpec]) -> list[pb.TaskSpec]:
    after = {s.predecessor_id: s for s in specs.values() if s.version >= 1 and s is not creation}
    order = [creation]
    while (nxt := after.get(order[-1].task_id)) is not None:
        order.append(nxt)
    return order


def _per_sender_runs(creation: pb.TaskSpec, specs: Mapping[bytes, pb.TaskSpec]) -> list[pb.TaskSpec]:
    by_sender: dict[bytes, dict[int, pb.TaskSpec]] = {}
    for spec in specs.values():
        if spec is not creation:
            by_sender.setdefault(spec.sender, {})[spec.task_counter] = spec
    runs = []
    for sender, tasks in by_sender.items():
        counter = creation.task_counter + 1 if sender == creation.sender else 1
        while counter in tasks:
            runs.append(tasks[counter])
            counter += 1
    # Senders interleave in counter order; a deterministic actor does not depend on how.
    runs.sort(key=lambda s: (s.task_counter, s.sender))
    return [creation, *runs]
