"""A node process: a gRPC server on uvloop hosting many actors; the unit of fail-stop failure.

Run as ``python -m actorrt.node --head HOST:PORT [--slot N] [--host H]`` with the cluster token in
``ACTORRT_TOKEN``. The node registers with the head, keeps a heartbeat stream to it, and exits when
the head is gone for good.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
import time

import uvloop
from google.protobuf.message import DecodeError
from grpc import aio

from actorrt import ids, runtime
from actorrt.actor_host import ActorHost
from actorrt.background import BackgroundTasks
from actorrt.checkpoints import latest_manifest, read_checkpoint
from actorrt.exceptions import ActorRTError
from actorrt.head_client import HEAD_LOSS_GRACE_S, HeadClient
from actorrt.lineage_store import LineageStore
from actorrt.node_service import NodeServicer
from actorrt.processes import NODE_HASH_SEED, daemon_setup
from actorrt.recovery import replay_order
from actorrt.rpc import head_pb2, node_pb2, node_pb2_grpc
from actorrt.rpc.checkpoint_pb2 import ActorCheckpoint
from actorrt.task_spec import SenderContext
from actorrt.transport import channel, metadata, start_server
from actorrt.worker import Worker

log = logging.getLogger("actorrt.node")

SURVIVOR_FLUSH_TIMEOUT_S = 10.0


class NodeProcess:
    """The runtime of a node process (what ``actorrt.runtime.current()`` returns there)."""

    def __init__(self, head_address: str, token: str, slot: int, host: str) -> None:
        self.head_address = head_address
        self.token = token
        self.requested_slot = slot
        self.bind_host = host
        self.worker = Worker(token, ids.driver_id(), asyncio.get_running_loop())
        self.worker.host = ActorHost(self.worker)
        self.servicer = NodeServicer(self.worker)
        self.head = HeadClient(head_address, token)
        self._background = BackgroundTasks("node")
        self._inherited: set[int] = set()  # dead slots whose actors this process rebuilt (or is rebuilding)
        self._recovering = asyncio.Lock()  # recoveries plan one at a time (their replays overlap)
        self._recoveries = 0  # started and not finished

    def get(self, refs, timeout=None):
        raise ActorRTError("actorrt.get() cannot block inside an actor; use `await ref` in an async method")

    async def run(self) -> None:
        server, address = await start_server(
            self.bind_host, 0, [(self.servicer, node_pb2.DESCRIPTOR.services_by_name["Node"])], self.token
        )
        self.worker.bind(address)
        runtime.set_current(self)
        self._main_task = asyncio.current_task()
        reply = await self.head.register(self.requested_slot, address, os.getpid(), socket.gethostname())
        self.servicer.slot, self.servicer.epoch = reply.slot, reply.epoch
        self.worker.slot = reply.slot
        # A restarted slot rebuilds its actors, and those of the dead slots the view says it inherits.
        self._inherited = self._slots_inherited_in(reply.view)
        if reply.epoch > 1:  # heartbeats and views go on during the recovery
            self._start_recovery({reply.slot, *self._inherited}, reply.detection_ms, reply.restart_ms)
        else:
            self.worker.recovered.set()
        self.worker.apply_view(reply.view)
        # Tasks submitted outside any actor task come from the node itself.
        self.worker.process_context = SenderContext(ids.actor_id(f"node-{reply.slot}".encode(), reply.epoch))
        log.info("node %d (epoch %d) serving on %s", reply.slot, reply.epoch, address)
        try:
            await self._follow_head()
        finally:
            self._background.cancel_all()
            self.worker.host.stop()
            await self.worker.aclose()
            await server.stop(0.5)

    def _slots_inherited_in(self, view: head_pb2.ClusterView) -> set[int]:
        """Dead slots that will not come back whose actors this slot rebuilds and serves."""
        return {n.slot for n in view.nodes if n.HasField("heir") and n.heir == self.servicer.slot}

    def _start_recovery(self, slots: set[int], detection_ms: float = 0.0, restart_ms: float = 0.0) -> None:
        """Rebuild the actors ``slots`` hosted: this slot's after a restart, or those of a dead
        slot this one inherits. Called before the view that makes senders re-send their tasks
        here is applied: arrivals wait until the replays are queued, and fetches of objects the
        lost processes owned wait for the replays."""
        self.worker.host.hold()
        self.worker.recovered.clear()
        self._recoveries += 1
        self._background.spawn(self._recover(slots, detection_ms, restart_ms))

    async def _recover(self, slots: set[int], detection_ms: float, restart_ms: float) -> None:
        stats = node_pb2.RecoveryStats(detection_ms=detection_ms, restart_ms=restart_ms, slots=sorted(slots))
        self.servicer.recoveries.append(stats)  # filled in as the recovery goes
        ft = self.worker.ft
        try:
            # Planning is one recovery at a time (each sees the actors the previous one queued);
            # replays are not: one may await an actor another is rebuilding.
            async with self._recovering:
                try:
                    if ft.mode == "checkpoint":
                        actors = await self._restore_global_checkpoint(stats)
                    elif ft.flusher is None:
                        log.error("no lineage is logged (ft=%s): the actors of %s are lost", ft.mode, sorted(slots))
                        actors = []
                    else:
                        actors = await self._replay_lineage(stats, slots)
                finally:
                    self.worker.host.release()
            replay_started = time.perf_counter()
            await asyncio.gather(*(a.replayed.wait() for a in actors))
            stats.replay_ms = (time.perf_counter() - replay_started) * 1e3
        finally:
            self._recoveries -= 1
            if not self._recoveries:
                self.worker.recovered.set()

    async def _replay_lineage(self, stats: node_pb2.RecoveryStats, slots: set[int]) -> list:
        """Paper §4.2.3: survivors flush their stashes, so the store holds every task they depend
        on; each actor then restores its newest checkpoint (or runs its constructor) and
        re-executes its recorded tasks after it. Senders re-send what they still wait for."""
        store, host = self.worker.ft.flusher.store, self.worker.host
        started = time.perf_counter()
        listed = [actor_id for slot in sorted(slots) for actor_id in await store.actors_on(slot)]
        actor_ids = [a for a in dict.fromkeys(listed) if a not in host.actors]  # each once, and not twice
        await self._flush_survivors()
        flushed = time.perf_counter()
        plans = [await self._replay_plan(store, actor_id) for actor_id in actor_ids]
        stats.flush_ms, stats.fetch_ms = (flushed - started) * 1e3, (time.perf_counter() - flushed) * 1e3
        actors = []
        for actor_id, plan in zip(actor_ids, plans, strict=True):
            if isinstance(plan, str):
                actors.append(host.lost(actor_id, plan))
                continue
            checkpoint, order = plan
            actors.append(host.recover(actor_id, order, checkpoint))
            stats.from_checkpoint += checkpoint is not None
            stats.tasks_replayed += len(order)
        stats.actors = len(actors)
        log.info("node %d: replaying %s", self.worker.slot, stats)
        return actors

    async def _restore_global_checkpoint(self, stats: node_pb2.RecoveryStats) -> list:
        """ft="checkpoint": this node's actors as of the last global checkpoint (no replay)."""
        started = time.perf_counter()
        directory = self.worker.ft.options.checkpoint_dir
        manifest = await asyncio.to_thread(latest_manifest, directory)
        if manifest is None:
            log.error("no global checkpoint in %s: the actors of node %d are lost", directory, self.worker.slot)
            return []
        actors = []
        for actor_hex, entry in manifest["actors"].items():
            checkpoint = await asyncio.to_thread(read_checkpoint, entry["path"])
            if checkpoint.creation.slot == self.worker.slot:
                actors.append(self.worker.host.recover(bytes.fromhex(actor_hex), [], checkpoint))
        stats.actors = stats.from_checkpoint = len(actors)
        stats.fetch_ms = (time.perf_counter() - started) * 1e3
        log.info("node %d: restored %d actors from global checkpoint %d", self.worker.slot, len(actors), manifest["id"])
        return actors

    @staticmethod
    async def _replay_plan(store: LineageStore, actor_id: bytes) -> tuple[ActorCheckpoint | None, list] | str:
        """``(checkpoint, tasks to re-execute after it)`` for ``actor_id``, or why it cannot be rebuilt."""
        pointer = await store.checkpoint_of(actor_id)
        checkpoint = None
        if pointer is not None:
            seq, path = pointer
            try:
                checkpoint = await asyncio.to_thread(read_checkpoint, path)
            except (OSError, DecodeError) as exc:
                return (f"actor {ids.short(actor_id)} cannot be rebuilt: its checkpoint {seq} ({path}) is unreadable "
                        f"here ({exc}); the checkpoint directory must be reachable from every node")
        try:
            return checkpoint, replay_order(actor_id, await store.sent_to(actor_id), checkpoint)
        except ActorRTError as exc:
            return f"actor {ids.short(actor_id)} cannot be rebuilt: {exc}"

    async def _flush_survivors(self) -> None:
        view = self.worker.view
        peers = [n.address for n in view.nodes if n.state == head_pb2.ALIVE and n.address != self.worker.address]
        request = node_pb2.FlushStashRequest(slot=self.worker.slot, epoch=self.servicer.epoch)

        async def flush(address: str) -> None:
            try:
                async with channel(address) as chan:
                    await node_pb2_grpc.NodeStub(chan).FlushStash(request, metadata=metadata(self.token),
                                                                   timeout=SURVIVOR_FLUSH_TIMEOUT_S)
            except aio.AioRpcError as exc:
                # Gone too: its own recovery rebuilds what it held (up to f failures at once).
                log.warning("survivor %s did not flush its stash: %s", address, exc.details())

        # This process's own stash too: it survived, if it inherits a dead slot's actors (the
        # flusher retries until the store answers: a replay cannot go on without it).
        await asyncio.gather(self.worker.ft.flush_stash(), *(flush(a) for a in [*peers, *view.drivers]))

    async def _follow_head(self) -> None:
        why = await self.head.follow(self._apply_view, self._heartbeat, HEAD_LOSS_GRACE_S)
        log.error("%s; exiting", why)

    def _apply_view(self, view: head_pb2.ClusterView) -> None:
        inherited = self._slots_inherited_in(view) - self._inherited
        if inherited:  # dead slots that will not come back: this process rebuilds their actors
            log.warning("node %d inherits the actors of dead node(s) %s", self.servicer.slot, sorted(inherited))
            self._inherited |= inherited
            self._start_recovery(inherited)
        self.worker.apply_view(view)
        me = self.worker.node(self.servicer.slot)
        if me is None or me.epoch != self.servicer.epoch or me.state != head_pb2.ALIVE:
            # Fail-stop: the cluster has declared this incarnation dead and told its callers so;
            # running their tasks any further would contradict that.
            log.error("the head declared node %d (epoch %d) dead; exiting", self.servicer.slot, self.servicer.epoch)
            asyncio.get_running_loop().call_soon(self._main_task.cancel)

    def _heartbeat(self) -> head_pb2.Heartbeat:
        return head_pb2.Heartbeat(slot=self.servicer.slot, epoch=self.servicer.epoch, stats=self.servicer.stats())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="actorrt.node")
    parser.add_argument("--head", required=True, help="head address host:port")
    parser.add_argument("--slot", type=int, default=-1, help="slot to take (-1: any free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    args = parser.parse_args(argv)
    if os.environ.get("PYTHONHASHSEED") != NODE_HASH_SEED:  # started by other means: again, with the seed
        # The same interpreter flags (``-X``, ``-W``, a coverage wrapper's) and arguments.
        args_again = sys.orig_argv[1:] if argv is None else ["-m", "actorrt.node", *argv]
        command = [sys.executable, *args_again]
        os.execve(sys.executable, command, dict(os.environ, PYTHONHASHSEED=NODE_HASH_SEED))
    token = daemon_setup("actorrt.node")

    async def amain() -> None:
        node = NodeProcess(args.head, token, args.slot, args.host)
        task = asyncio.current_task()
        for sig in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(sig, task.cancel)
        try:
            await node.run()
        except asyncio.CancelledError:
            pass

    uvloop.run(amain())


if __name__ == "__main__":
    main()
