"""An actor's checkpoints: its state and progress, taken between two tasks, and restored.

A checkpoint holds the actor's state, what it ran from each sender (its ledger), its own task
counters and its once-marks. The store points at the newest file, and the lineage the previous
checkpoint covered is collected: not this one's, since a spec still on its way to the store (a
slow flush) would write its record again after the delete.

The state is snapshotted between two tasks; making it durable (the file, its fsyncs, the store's
pointer, then telling peers what it covers) takes milliseconds, during which the actor's periodic
checkpoints let it run on: until the pointer is written, a recovery uses the previous checkpoint
and replays more, which is all a checkpoint changes. A checkpoint asked for with
``actorrt.checkpoint`` is durable when its task returns.
"""

from __future__ import annotations

import asyncio
import logging
import time
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

# Periodic checkpoints snapshotted while earlier ones are still being written, at most: past it the
# actor waits for the writes (the disk or the store is slower than its tasks; snapshots take memory).
MAX_UNWRITTEN = 4
# A checkpointing actor that holds this many outputs checkpoints after its task, whatever its
# cadence, and what it holds waits for a checkpoint at most about HELD_AT_MOST_S.
MAX_HELD = 1000
HELD_AT_MOST_S = 1.0
# An eager actor's checkpoints are group commits: one every EAGER_EVERY_S while it runs tasks, or
# after EAGER_GROUP tasks if that comes first (its tasks' results wait for the one that covers them).
EAGER_EVERY_S = 0.05
EAGER_GROUP = 256


class Checkpointer:
    def __init__(self, actor: ActorInstance) -> None:
        self._actor = actor
        self.seq = 0  # the last checkpoint's number
        self.since = 0  # tasks run since it
        self._cut: dict[bytes, int] = {}  # the per-sender counters it covers
        self._cut_seq = 0  # the checkpoint they are of
        self._collected: dict[bytes, int] = {}  # how far the store's copy of this actor's tasks was collected
        # Where the collection before that started: each collection covers that interval once
        # more, deleting a copy a slow writer (a result's owner) wrote after the first pass.
        self._collected_before: dict[bytes, int] = {}
        self._writing: asyncio.Task | None = None  # the newest checkpoint being made durable
        self._unwritten = 0  # checkpoints snapshotted and not yet durable
        self._taken_at = time.monotonic()  # when the last one was snapshotted (or the actor made)
        self.announced: node_pb2.Checkpointed | None = None  # the newest durable one, as told to every process
        # What it took since its checkpoint (a deterministic actor under ft="checkpoint"): the
        # checkpoint, its first sender then, and whether it took more (mark_since).
        self._since: tuple[int, bytes, bool] = (0, b"", False)

    def due(self, spec: pb.TaskSpec | None = None) -> bool:
        """Whether to checkpoint after ``spec`` ran: every ``checkpoint_every`` tasks, or when an
        extra asks (a memory-pressure checkpoint). Never under global rollback, whose checkpoints
        are global: an actor's own one would tell its senders it covers calls that the global
        checkpoint a rollback restores does not, and they would stop keeping them. Nor during a
        replay: it redoes a past the store holds already, and a checkpoint of a large state would
        hold the recovery up (the first task after the replay takes the one due)."""
        actor = self._actor
        if (actor.death is not None or (spec is not None and spec.method == CHECKPOINT_METHOD)
                or actor.services.ft.rolls_back or actor.replaying):
            return False
        if actor.policy.kind == "eager":  # a group commit of the tasks since the last one
            return self._overdue() or self.since >= EAGER_GROUP
        every = actor.creation.checkpoint_every
        if every and self.since >= every:
            return True
        if actor.held is not None and (len(actor.held) >= MAX_HELD or self._overdue() or actor.services.ft.over_limit):
            return True
        return actor.services.ft.logs_lineage and any(
            getattr(value, "wants_checkpoint", bool)() for value in actor.context.extras.values())

    @property
    def cadence_s(self) -> float | None:
        """How often its policy has it checkpoint while it runs tasks, in seconds, if it says (an
        eager actor's group commits: ``EAGER_EVERY_S``)."""
        policy = self._actor.policy
        return EAGER_EVERY_S if policy.kind == "eager" else policy.every_s

    @property
    def every_s(self) -> float | None:
        """How often an idle actor with a checkpointing policy looks whether a checkpoint is due:
        its cadence, and at most ``HELD_AT_MOST_S`` (what it holds waits no longer)."""
        if self._actor.held is None:
            return None
        return min(self.cadence_s or HELD_AT_MOST_S, HELD_AT_MOST_S)

    def _overdue(self) -> bool:
        if not self.since:
            return False
        waited = time.monotonic() - self._taken_at
        cadence, held = self.cadence_s, self._actor.held
        return bool(cadence and waited >= cadence) or (held is not None and len(held) > 0
                                                        and waited >= HELD_AT_MOST_S)

    def took_from(self, sender: bytes) -> None:
        """``ft="checkpoint"``: the actor takes a call of ``sender`` (or, with b"", calls an
        actor). A rollback may do again what it did since its checkpoint only if all of it came
        from one sender: marked durably before the call runs (``rollback_plan``)."""
        seq, first, more = self._since if self._since[0] == self.seq else (self.seq, b"", False)
        if seq and not more and not (sender and sender == first):
            directory, actor_id = self._actor.services.ft.options.checkpoint_dir, self._actor.actor_id
            if sender and not first:
                checkpoints.mark_since(directory, actor_id, seq, checkpoints.FROM + sender.hex())
                first = sender
            else:  # a call, or a second sender
                checkpoints.mark_since(directory, actor_id, seq, checkpoints.MORE)
                more = True
        self._since = (seq, first, more)

    def durable_from(self, sender: bytes) -> int:
        """How far its newest durable checkpoint covers ``sender``'s calls (what a failure keeps)."""
        done = self.announced
        return next((c.counter for c in done.received if c.actor == sender), 0) if done is not None else 0

    async def when_idle(self, every_s: float) -> None:
        """An actor with a checkpointing policy that ran tasks since its checkpoint and waits for
        more checkpoints all the same, every ``every_s``: what it holds must not wait for its next
        task."""
        actor = self._actor
        while actor.death is None:
            await asyncio.sleep(every_s / 2)
            if (self._overdue() and actor.between_tasks and actor.mailbox.empty() and not actor.replaying
                    and self._unwritten < MAX_UNWRITTEN and actor.services.lease.valid()):
                await self.take_or_log()  # (snapshotted before its first await: between two tasks)

    async def take(self, spec: pb.TaskSpec | None = None, wait: bool = True) -> dict[str, Any]:
        """Checkpoint now, between tasks; ``spec`` is the ``__checkpoint__`` task running, whose
        own result goes in the checkpoint (a re-send of it is answered from there). Unless
        ``wait``, the state is snapshotted now and made durable while the actor runs on."""
        actor = self._actor
        ft = actor.services.ft
        if self._unwritten >= MAX_UNWRITTEN and self._writing is not None:
            await asyncio.wait([self._writing])
        self.seq += 1
        self.since = 0
        self._taken_at = time.monotonic()
        directory = ft.options.checkpoint_dir
        path = checkpoints.checkpoint_path(directory, actor.actor_id, self.seq,
                                           f"{actor.services.slot}.{actor.services.epoch}")
        result = {"actor_id": actor.actor_id.hex(), "seq": self.seq, "path": str(path)}
        if spec is not None:
            actor.ledger.keep(spec, pb.ObjectValue(object_id=ids.object_id(spec.task_id),
                                                   value=serialize(result)))
        to_collect = checkpoints.covered_tasks(actor.actor_id, self._collected_before, self._cut)
        base = self._cut_seq  # once its collection runs, no replay may start before it
        self._collected_before, self._collected = self._collected, dict(self._cut)
        self._cut, self._cut_seq = dict(actor.ledger.last_counter), self.seq
        snapshot = self._snapshot()  # now, synchronously: the state between two tasks
        held = actor.held.mark() if actor.held is not None else 0  # what it made before now leaves once durable
        covered = self._extras_covered()  # as of the snapshot: later calls are not covered by it
        for value in actor.context.extras.values():
            getattr(value, "checkpointed", bool)()
        # After the one before it: the store's pointer must only move forward.
        self._unwritten += 1
        durable = self._make_durable(self._writing, self.seq, path, snapshot, to_collect, covered, base, held)
        if wait:
            self._writing = asyncio.ensure_future(durable)
            await self._writing
        else:
            self._writing = actor.services.spawn(self._logged(durable))
        return result

    async def _make_durable(self, previous: asyncio.Task | None, seq: int, path: Any,
                            snapshot: checkpoint_pb2.ActorCheckpoint, to_collect: list[bytes],
                            covered: list[tuple[bytes, int]], base: int, held: int) -> None:
        try:
            if previous is not None and not previous.done():
                await asyncio.wait([previous])
            await self._write(seq, path, snapshot, to_collect, covered, base)
            if self._actor.held is not None:
                self._actor.held.release(held)
        finally:
            self._unwritten -= 1

    async def _write(self, seq: int, path: Any, snapshot: checkpoint_pb2.ActorCheckpoint,
                     to_collect: list[bytes], covered: list[tuple[bytes, int]], base: int) -> None:
        actor = self._actor
        ft = actor.services.ft
        await asyncio.to_thread(checkpoints.write_checkpoint, path, snapshot)
        if hasattr(ft, "write_relations"):  # what its tasks related: a replay from it will not relate it again
            await ft.write_relations()
        if ft.store is not None:
            # Until every process hears of it, a replay may start from ``base`` (a standby's copy).
            await ft.store.set_checkpoint(actor.actor_id, seq, str(path), announced=base)
        await asyncio.to_thread(checkpoints.drop_older, path)
        if ft.store is not None and to_collect:
            actor.services.spawn(ft.store.forget(actor.actor_id, to_collect))
        if ft.store is not None or ft.rolls_back:
            # From now on a replay (or a rollback) starts here: what only an earlier start needed
            # can go, the calls senders keep for a rollback among it.
            self.announced = node_pb2.Checkpointed(
                actor=actor.actor_id, seq=seq, path=str(path), standby=actor.standby,
                received=[node_pb2.Counter(actor=p.sender, counter=p.last_counter) for p in snapshot.senders]
                + [node_pb2.Counter(actor=s, counter=n) for s, n in covered],
                sent=[node_pb2.Counter(actor=r, counter=n) for r, n in covered_sends(snapshot).items()])
            if actor.creation.standby and ft.store is not None:
                # Its standby loads it first: until everyone hears of it, the standby's copy of the
                # previous one may still be replayed from (core/standbys.py).
                if actor.standby is not None:
                    await actor.services.hand_to_standby(self.announced)
                await ft.store.set_announced(actor.actor_id, seq)
                if actor.standby is None:  # (it may have changed meanwhile)
                    self.announced.ClearField("standby")
                else:
                    self.announced.standby = actor.standby
            actor.services.announce_checkpoint(self.announced)

    async def take_or_log(self) -> None:
        """A periodic checkpoint, made durable while the actor runs on: one that fails is logged,
        and recovery uses the previous one."""
        await self.take(wait=False)

    async def _logged(self, durable: Any) -> None:
        try:
            await durable
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

    def restore(self, checkpoint: checkpoint_pb2.ActorCheckpoint, path: str = "", instance: Any = None) -> None:
        """Give the actor the state of ``checkpoint`` (before any task runs), read from file
        ``path``; ``instance``: that state restored already (a standby's copy)."""
        actor = self._actor
        actor.instance = instance if instance is not None else checkpoints.restore_state(checkpoint.creation,
                                                                                          checkpoint.state)
        self.seq = self._cut_seq = checkpoint.seq
        if path:  # a new standby loads it at once (every process heard of it when it was taken)
            self.announced = node_pb2.Checkpointed(actor=actor.actor_id, seq=checkpoint.seq, path=path)
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
        # Whether a replay follows or the whole cluster rolled back, the calls it had sent that had
        # not come back go again: their receivers may not have run them before their own checkpoint
        # (a stream operator's batch in flight), and a receiver that did answers from its ledger.
        for pending in checkpoint.pending:
            actor.services.send_again(pending)


def covered_sends(snapshot: checkpoint_pb2.ActorCheckpoint) -> dict[bytes, int]:
    """Per receiver, the counter up to which a replay from ``snapshot`` never awaits a call's
    result again: the calls it sent, less those it had no answer to, which a restore sends again
    (their receivers answer from their ledgers, so they must keep those results)."""
    again: dict[bytes, int] = {}
    for pending in snapshot.pending:
        receiver, counter = pending.spec.receiver, pending.spec.task_counter
        again[receiver] = min(again.get(receiver, counter), counter)
    return {c.receiver: min(c.count, again.get(c.receiver, c.count + 1) - 1) for c in snapshot.counters}
