"""Rebuilding lost actors on this node: its own after a restart, those of a dead slot it inherits,
or those whose standby it keeps (``core/standbys.py``), promoted in their place.

Paper §4.2.3: survivors flush their stashes, so the store holds every task they depend on; each
lost actor then restores its newest checkpoint (or runs its constructor) and re-executes its
recorded tasks after it, while arrivals wait. Under global rollback the node's actors restore the
last global checkpoint instead, and where nothing is logged they are lost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from google.protobuf.message import DecodeError
from grpc import aio

from actorrt.cluster.node_service import NodeServicer
from actorrt.core.first_calls import FirstCalls
from actorrt.core.standbys import Standbys
from actorrt.core.worker import Worker
from actorrt.exceptions import ActorRTError
from actorrt.lineage import checkpoints, ids
from actorrt.lineage.checkpoints import read_checkpoint
from actorrt.lineage.replay import replay_order
from actorrt.net.auth import metadata
from actorrt.net.server import channel
from actorrt.rpc import head_pb2, node_pb2, node_pb2_grpc
from actorrt.rpc.checkpoint_pb2 import ActorCheckpoint
from actorrt.store.clients import until_reachable
from actorrt.store.lineage_store import LineageStore

log = logging.getLogger(__name__)

# An actor's rebuild: its checkpoint, the checkpoint's file, its state restored already (by a
# standby here), the tasks to re-execute after it, and the newest checkpoint's number.
ReplayPlan = tuple[ActorCheckpoint | None, str, Any, list, int]
# How long one FlushStash call may take; a survivor still alive after it is asked again.
SURVIVOR_FLUSH_TIMEOUT_S = 10.0
# A survivor that is alive but has not flushed is asked again, backing off to this.
FLUSH_RETRY_MAX_S = 2.0


class NodeRecoveries:
    def __init__(self, worker: Worker, servicer: NodeServicer, token: str,
                 spawn: Callable[[Coroutine[Any, Any, Any]], Any]) -> None:
        self.worker = worker
        self.servicer = servicer  # its slot, epoch and the recovery stats it reports
        self.token = token
        self._spawn = spawn
        self._planning = asyncio.Lock()  # recoveries plan one at a time (their replays overlap)
        self._under_way = 0  # started and not finished

    def start(self, slots: set[int], detection_ms: float = 0.0, restart_ms: float = 0.0) -> None:
        """Rebuild the actors ``slots`` hosted: this slot's after a restart, or those of a dead
        slot this one inherits. Called before the view that makes senders re-send their tasks
        here is applied: arrivals wait until the replays are queued, and fetches of objects the
        lost processes owned wait for the replays."""
        self.worker.host.hold()
        self.worker.recovered.clear()
        self._under_way += 1
        self._spawn(self._recover(slots, detection_ms, restart_ms))

    def promote(self, moves: list[head_pb2.ActorMove]) -> None:
        """Standbys here take the place of their actors, whose node failed (the view moved them
        here): only the tasks for those actors wait, nothing else here is held, and nothing waits
        for the failed slot's restart."""
        for move in moves:
            self.worker.host.expect(move.actor)
        self.worker.recovered.clear()  # fetches of their objects wait for their replays
        self._under_way += 1
        self._spawn(self._recover(set(), 0.0, 0.0, moves))

    async def _recover(self, slots: set[int], detection_ms: float, restart_ms: float,
                       moves: list[head_pb2.ActorMove] | None = None) -> None:
        stats = node_pb2.RecoveryStats(detection_ms=detection_ms, restart_ms=restart_ms, promoted=moves is not None,
                                       slots=sorted(slots or {m.from_slot for m in moves or ()}))
        self.servicer.recoveries.append(stats)  # filled in as the recovery goes
        ft = self.worker.ft
        try:
            # Planning is one recovery at a time (each sees the actors the previous one queued);
            # replays are not: one may await an actor another is rebuilding.
            async with self._planning:
                try:
                    if ft.rolls_back:
                        actors = await self._restore_global_checkpoint(stats)
                    elif not ft.logs_lineage:
                        log.error("no lineage is logged (ft=%s): the actors of %s are lost", ft.mode, sorted(slots))
                        actors = []
                    else:
                        actors = await self._replay_lineage(stats, slots, moves or [])
                finally:
                    if moves is None:
                        self.worker.host.release()
                    else:  # a promotion that failed: their tasks must not wait for ever
                        for move in moves:
                            if move.actor not in self.worker.host.actors:
                                self.worker.host.lost(move.actor, f"its standby on node {self.worker.slot} could "
                                                                  f"not take its place")
            replay_started, skipped = time.perf_counter(), self.worker.outbox.sends_skipped
            await asyncio.gather(*(a.replayed.wait() for a in actors))
            stats.sends_skipped = self.worker.outbox.sends_skipped - skipped
            stats.replay_ms = (time.perf_counter() - replay_started) * 1e3
            stats.replay_tasks_per_s = stats.tasks_replayed / max(stats.replay_ms / 1e3, 1e-9)
        finally:
            self._under_way -= 1
            if not self._under_way:
                self.worker.recovered.set()
                self.worker.ran_before.clear()

    async def _replay_lineage(self, stats: node_pb2.RecoveryStats, slots: set[int],
                              moves: list[head_pb2.ActorMove]) -> list:
        """Paper §4.2.3: survivors flush their stashes, so the store holds every task they depend
        on; each actor then restores its newest checkpoint (or runs its constructor) and
        re-executes its recorded tasks after it. Senders re-send what they still wait for.

        The actors are those of ``slots`` (less those moved to their standbys), those moved to
        ``slots`` (the view keeps every move), and ``moves``: standbys here promoted."""
        store, host, membership = self.worker.ft.store, self.worker.host, self.worker.membership
        started = time.perf_counter()
        moved_in = [*moves, *(m for m in membership.moved.values() if m.slot in slots)]
        fences = {slot: self._fence_epoch(slot) for slot in slots}
        for move in moved_in:
            fences[move.from_slot] = max(fences.get(move.from_slot, 0), move.from_epoch + 1)
        for slot, epoch in sorted(fences.items()):  # the slot's earlier incarnations write nothing from now on
            await until_reachable(f"recovery: fencing node slot {slot}", store.fence, slot, epoch)
        listed = [actor_id for slot in sorted(slots)
                  for actor_id in await until_reachable(f"recovery: listing the actors of node {slot}",
                                                        store.actors_on, slot)
                  if membership.slot_for(actor_id, slot) == slot]
        listed += [move.actor for move in moved_in]
        actor_ids = [a for a in dict.fromkeys(listed) if a not in host.actors]  # each once, and not twice
        await self._flush_survivors(actor_ids)
        flushed = time.perf_counter()
        plans = await asyncio.gather(*(until_reachable(f"recovery: reading the lineage of actor {ids.short(actor_id)}",
                                                       self._replay_plan, store, actor_id, self.worker.standbys)
                                       for actor_id in actor_ids))  # one round trip for all, not one each
        stats.flush_ms, stats.fetch_ms = (flushed - started) * 1e3, (time.perf_counter() - flushed) * 1e3
        actors = []
        for actor_id, plan in zip(actor_ids, plans, strict=True):
            if isinstance(plan, str):
                actors.append(host.lost(actor_id, plan))
                continue
            checkpoint, path, instance, order, newest = plan
            actor = host.recover(actor_id, order, checkpoint, path, instance)
            actor.checkpointer.seq = max(actor.checkpointer.seq, newest)  # its next one is the newest
            actors.append(actor)
            stats.from_checkpoint += checkpoint is not None
            stats.from_standby += instance is not None
            stats.tasks_replayed += len(order)
        stats.actors = len(actors)
        log.info("node %d: replaying %s", self.worker.slot, stats)
        return actors

    async def _restore_global_checkpoint(self, stats: node_pb2.RecoveryStats) -> list:
        """ft="checkpoint": this node's actors as of the last global checkpoint (no replay)."""
        started = time.perf_counter()
        directory = self.worker.ft.options.checkpoint_dir
        pinned = self.worker.membership.view.rollback_manifest  # the round's: every node restores the same one
        manifest = await asyncio.to_thread(lambda: checkpoints.manifest(directory, pinned) if pinned
                                           else checkpoints.latest_manifest(directory))
        if manifest is None:
            log.error("no global checkpoint in %s: the actors of node %d are lost", directory, self.worker.slot)
            return []
        actors = []
        for actor_hex, entry in manifest["actors"].items():
            if checkpoints.writer_slot(entry["path"]) != self.worker.slot:
                continue  # another node's (whose files its checkpoints may be replacing meanwhile)
            checkpoint = await asyncio.to_thread(read_checkpoint, entry["path"])
            if checkpoint.creation.slot == self.worker.slot:
                actor = self.worker.host.recover(bytes.fromhex(actor_hex), [], checkpoint)
                first = next((f for f in self.worker.membership.view.first_calls if f.actor == actor.actor_id), None)
                if first is not None:  # it does again what it did since: that sender's calls first
                    actor.first = FirstCalls(first.sender, first.upto)
                actors.append(actor)
        stats.actors = stats.from_checkpoint = len(actors)
        stats.fetch_ms = (time.perf_counter() - started) * 1e3
        log.info("node %d: restored %d actors from global checkpoint %d", self.worker.slot, len(actors), manifest["id"])
        return actors

    def _fence_epoch(self, slot: int) -> int:
        """The first incarnation of ``slot`` allowed to write: this one, for its own slot; past
        the dead one, for a slot it inherits."""
        if slot == self.worker.slot:
            return self.worker.epoch
        info = self.worker.membership.node(slot)
        return (info.epoch if info is not None else 0) + 1

    @staticmethod
    async def _replay_plan(store: LineageStore, actor_id: bytes, standbys: Standbys | None = None) -> ReplayPlan | str:
        """``(checkpoint, its file, its state restored by a standby here, tasks to re-execute after
        it)`` for ``actor_id``, or why it cannot be rebuilt."""
        pointer = await store.checkpoint_of(actor_id)
        checkpoint, path, instance = None, "", None
        if pointer is not None:
            copy = await standbys.take(actor_id, pointer) if standbys is not None else None
            if copy is not None:  # maybe the checkpoint before the pointer's: the replay is longer
                _, path, (checkpoint, instance) = copy
            else:
                path = pointer.path
                try:
                    checkpoint = await asyncio.to_thread(read_checkpoint, path)
                except (OSError, DecodeError) as exc:
                    return (f"actor {ids.short(actor_id)} cannot be rebuilt: its checkpoint {pointer.seq} ({path}) "
                            f"is unreadable here ({exc}); the checkpoint directory must be reachable from every node")
        sent = await store.sent_to(actor_id)  # an unreachable store raises: the caller retries
        try:
            return checkpoint, path, instance, replay_order(actor_id, sent, checkpoint), pointer.seq if pointer else 0
        except ActorRTError as exc:
            return f"actor {ids.short(actor_id)} cannot be rebuilt: {exc}"

    async def _flush_survivors(self, rebuilt: list[bytes]) -> None:
        """Every survivor writes its stash to the store, and says how far its actors ran the tasks
        of the actors rebuilt here (their replays send those tasks again only if they need the
        results)."""
        view = self.worker.membership.view
        peers = [n.address for n in view.nodes if n.state == head_pb2.ALIVE and n.address != self.worker.address]
        request = node_pb2.FlushStashRequest(slot=self.worker.slot, epoch=self.servicer.epoch, senders=rebuilt)
        self.worker.ran_before.note(self.worker.host.ran_from(set(rebuilt)))
        membership = self.worker.membership

        async def flush(address: str) -> None:
            backoff = 0.1
            async with channel(address, self.worker.tls) as chan:
                while True:
                    try:
                        reply = await node_pb2_grpc.NodeStub(chan).FlushStash(request, metadata=metadata(self.token),
                                                                               timeout=SURVIVOR_FLUSH_TIMEOUT_S)
                        self.worker.ran_before.note(reply.ran)
                        return
                    except aio.AioRpcError as exc:
                        if membership.current_owner(address) != address:
                            # Gone too: its own recovery rebuilds what it held (up to f failures at once).
                            log.warning("survivor %s did not flush its stash: %s", address, exc.details())
                            return
                        # Alive, but its flush did not finish (the store is down?): its stash is
                        # not in the store, so the replay cannot start yet.
                        log.warning("survivor %s has not flushed its stash yet (%s); asking again in %.1f s",
                                    address, exc.code().name, backoff)
                    await asyncio.sleep(backoff)
                    backoff = min(2 * backoff, FLUSH_RETRY_MAX_S)

        # This process's own stash too: it survived, if it inherits a dead slot's actors (the
        # flusher retries until the store answers: a replay cannot go on without it).
        await asyncio.gather(self.worker.ft.flush(), *(flush(a) for a in [*peers, *view.drivers]))
