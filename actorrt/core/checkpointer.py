"""An actor's checkpoints: its state and progress, taken between two tasks, and restored.

A checkpoint holds the actor's state, what it ran from each sender (its ledger), its own task
counters and its once-marks. The store points at the newest file, and the lineage the previous
checkpoint covered is collected: not this one's, since a spec still on its way to the store (a
slow flush) would write its record again after the delete.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from actorrt.core.serialization import serialize
from actorrt.core.task_spec import CHECKPOINT_METHOD
from actorrt.exceptions import ClusterError
from actorrt.lineage import checkpoints, ids
from actorrt.rpc import checkpoint_pb2, node_pb2
from actorrt.rpc import common_pb2 as pb
from actorrt.util import pickling

if TYPE_CHECKING:
    from actorrt.core.actor import ActorInstance

log = logging.getLogger(__name__)


class Checkpointer:
    def __init__(self, actor: ActorInstance) -> None:
        self._actor = actor
        self.seq = 0  # the last checkpoint's number
        self.since = 0  # tasks run since it
        self._cut: dict[bytes, int] = {}  # the per-sender counters it covers
        self._collected: dict[bytes, int] = {}  # how far the store's copy of this actor's tasks was collected
        # Where the collection before that started: each collection covers that interval once
        # more, deleting a copy a slow writer (a result's owner) wrote after the first pass.
        self._collected_before: dict[bytes, int] = {}

    def due(self, spec: pb.TaskSpec) -> bool:
        """Whether to checkpoint after ``spec`` ran: every ``checkpoint_every`` tasks, or when an
        extra asks (a memory-pressure checkpoint; under replay only: a rollback's checkpoints
        are global)."""
        actor = self._actor
        if actor.death is not None or spec.method == CHECKPOINT_METHOD:
            return False
        every = actor.creation.checkpoint_every
        if every and self.since >= every:
            return True
        return actor.services.ft.logs_lineage and any(
            getattr(value, "wants_checkpoint", bool)() for value in actor.context.extras.values())

    async def take(self, spec: pb.TaskSpec | None = None) -> dict[str, Any]:
        """Checkpoint now, between tasks; ``spec`` is the ``__checkpoint__`` task running, whose
        own result goes in the checkpoint (a re-send of it is answered from there)."""
        actor = self._actor
        ft = actor.services.ft
        self.seq += 1
        self.since = 0
        directory = ft.options.checkpoint_dir
        path = checkpoints.checkpoint_path(directory, actor.actor_id, self.seq,
                                           f"{actor.services.slot}.{actor.services.epoch}")
        result = {"actor_id": actor.actor_id.hex(), "seq": self.seq, "path": str(path)}
        if spec is not None:
            actor.ledger.keep(spec, pb.ObjectValue(object_id=ids.object_id(spec.task_id),
                                                   value=serialize(result)))
        to_collect = checkpoints.covered_tasks(actor.actor_id, self._collected_before, self._cut)
        self._collected_before, self._collected = self._collected, dict(self._cut)
        self._cut = dict(actor.ledger.last_counter)
        snapshot = self._snapshot()  # now, synchronously: the state between two tasks
        for value in actor.context.extras.values():
            getattr(value, "checkpointed", bool)()
        await asyncio.to_thread(checkpoints.write_checkpoint, path, snapshot)
        if ft.store is not None:
            await ft.store.set_checkpoint(actor.actor_id, self.seq, str(path))
        await asyncio.to_thread(checkpoints.drop_older, path)
        if ft.store is not None:
            if to_collect:
                actor.services.spawn(ft.store.forget(actor.actor_id, to_collect))
            # From now on a replay starts here: what only an earlier start needed can go.
            actor.services.announce_checkpoint(node_pb2.Checkpointed(
                actor=actor.actor_id,
                received=[node_pb2.Counter(actor=p.sender, counter=p.last_counter) for p in snapshot.senders]
                + [node_pb2.Counter(actor=s, counter=n) for s, n in self._extras_covered()],
                sent=[node_pb2.Counter(actor=c.receiver, counter=c.count) for c in snapshot.counters]))
        return result

    async def take_or_log(self) -> None:
        """A periodic checkpoint: one that fails is logged, and recovery uses the previous one."""
        try:
            await self.take()
        except (OSError, ClusterError) as exc:
            log.error("actor %s: checkpoint failed: %s", ids.short(self._actor.actor_id), exc)

    def _snapshot(self) -> checkpoint_pb2.ActorCheckpoint:
        actor = self._actor
        return checkpoint_pb2.ActorCheckpoint(
            actor_id=actor.actor_id, seq=self.seq, creation=actor.creation,
            state=checkpoints.snapshot_state(actor.instance), last_executed=actor.last_executed,
            last_sender=actor.last_sender, executed=actor.executed, senders=actor.ledger.progress(self._collected),
            counters=[checkpoint_pb2.SubmitCounter(receiver=r, count=n) for r, n in actor.context.counters.items()],
            actors_created=actor.context.actors_created,
            watermarks=[checkpoint_pb2.Watermark(source=k, batch=b, seq=q) for k, (b, q) in actor.watermarks.items()],
            pending=actor.services.pending_sent(actor.actor_id),
            extras={name: pickling.dumps(value) for name, value in actor.context.extras.items()},
        )

    def _extras_covered(self) -> list[tuple[bytes, int]]:
        return [pair for value in self._actor.context.extras.values() for pair in getattr(value, "covered", list)()]

    def restore(self, checkpoint: checkpoint_pb2.ActorCheckpoint) -> None:
        """Give the actor the state of ``checkpoint`` (before any task runs)."""
        actor = self._actor
        actor.instance = checkpoints.restore_state(checkpoint.creation, checkpoint.state)
        self.seq = checkpoint.seq
        actor.last_executed, actor.last_sender = checkpoint.last_executed, checkpoint.last_sender
        actor.executed = checkpoint.executed
        actor.ledger.restore(checkpoint.senders)
        for progress in checkpoint.senders:
            self._cut[progress.sender] = progress.last_counter
            self._collected[progress.sender] = self._collected_before[progress.sender] = progress.collected
        actor.context.counters = {c.receiver: c.count for c in checkpoint.counters}
        actor.context.actors_created = checkpoint.actors_created
        actor.watermarks = {w.source: (w.batch, w.seq) for w in checkpoint.watermarks}
        actor.context.extras = {name: pickling.loads(blob) for name, blob in checkpoint.extras.items()}
        if actor.services.ft.logs_lineage:  # (a global rollback takes the whole cluster back instead)
            for pending in checkpoint.pending:
                actor.services.send_again(pending)

