"""The head process: membership, failure detection, node-slot restarts, the store shards.

Run as ``python -m actorrt.cluster.head [HEAD OPTIONS] --session-dir D`` with the cluster token in
``ACTORRT_TOKEN`` and, for mutual TLS, its files in ``ACTORRT_TLS_*`` (``actorrt start --head``
does this, under a supervisor that restarts it; its nodes get the same). It starts K redis-server
shards and N node processes (its *managed* slots), writes the session file, and publishes a
``ClusterView`` to every subscriber whenever membership changes. A managed node that dies is
detected at once (its process exits and its stream closes) and its slot restarts with a new epoch.

What it decides it writes to the store first (``head_state.py``); a head started with
``--restarted`` reads it back, adopts the shards and nodes that kept running, and serves on its
predecessor's address: nodes and drivers reconnect and go on. Its RPCs are served by
``HeadServicer`` (``head_service.py``); its store shards are kept by ``StoreShards``
(``store_shards.py``), and the drivers its view names by ``ConnectedDrivers`` (``connected_drivers.py``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import click
import uvloop
from grpc import aio

from actorrt.cluster import session, store_lease
from actorrt.cluster.actor_names import ActorNames
from actorrt.cluster.connected_drivers import ConnectedDrivers
from actorrt.cluster.daemon import daemon_setup, node_environment
from actorrt.cluster.deadlocks import DeadlockDetector
from actorrt.cluster.head_options import HeadOptions, head_options
from actorrt.cluster.head_service import HeadServicer
from actorrt.cluster.head_state import HeadState, Restored, SupersededError
from actorrt.cluster.metrics_endpoint import serve_metrics
from actorrt.cluster.session import TOKEN_ENV, Session
from actorrt.cluster.store_shards import StoreShards
from actorrt.cluster.supervisor import ALIVE_EVERY_S, SUPERSEDED_EXIT
from actorrt.cluster.warm_nodes import WarmNodes
from actorrt.exceptions import ClusterError
from actorrt.net.server import InvalidRequestError, start_server
from actorrt.net.tls import TlsFiles
from actorrt.rpc import head_pb2, node_pb2
from actorrt.store.clients import open_store
from actorrt.util import children
from actorrt.util.background import BackgroundTasks
from actorrt.util.children import Child, start_child

log = logging.getLogger("actorrt.head")

# A slot whose process dies before registering is restarted after a growing pause (a node that
# cannot start, e.g. a broken environment, must not be relaunched in a tight loop). A node that
# fails after registering is restarted at once.
MAX_RESTART_DELAY_S = 30.0
# A heartbeat grants its node a lease this fraction of the heartbeat timeout long: the lease runs
# out well before the head could declare the node dead (a margin for a slow head, and clock rates).
LEASE_FRACTION = 0.5
# Heartbeats are checked this often; a check this much later than due means the head itself was
# not running (SIGSTOP, a paused VM), not that the nodes were silent.
HEARTBEAT_CHECK_S = 0.1
PAUSED_AFTER_S = 1.0
# A restarted head counts its predecessor's drivers as connected for at least this long.
DRIVERS_BACK_S = 10.0


@dataclass
class Slot:
    info: head_pb2.NodeInfo
    process: Child | None = None
    restart_delay: float = 0.0
    last_heartbeat: float = 0.0
    killed_at: float | None = None  # KillNode sent SIGKILL then (loop time)
    failed_at: float = 0.0  # declared dead then
    detection_ms: float = 0.0  # from the kill (or the last heartbeat) to the declaration
    granted_until: float = 0.0  # loop time by which the lease of its last accepted heartbeat has run out
    stats: node_pb2.NodeStatsReply = field(default_factory=node_pb2.NodeStatsReply)


class Head:
    def __init__(self, token: str, session_dir: Path, options: HeadOptions, parent_pid: int | None = None,
                 tls: TlsFiles | None = None, restarted: bool = False) -> None:
        self.token = token
        self.tls = tls
        self.session_dir = session_dir
        self.restarted = restarted  # a head before this one ran the cluster: take over its state
        self.cluster_id = b""  # see ClusterView.cluster_id
        self.parent_pid = parent_pid
        ft = options.fault_tolerance
        if not ft.checkpoint_dir:
            ft = replace(ft, checkpoint_dir=str(Path(session_dir).absolute() / session.CHECKPOINTS_DIR))
        self.options = replace(options, fault_tolerance=ft)
        options.check_store_url()
        self.mode = ft.mode
        self.address = ""
        self.slots: dict[int, Slot] = {}
        self.rollbacks = 0
        self.revision = 0
        self._subscribers: set[asyncio.Queue[head_pb2.ClusterView]] = set()
        self.drivers = ConnectedDrivers(self.publish)
        self._stopping = False
        self._warm: WarmNodes | None = None  # node processes kept warm for restarts
        self._metrics: Any = None  # the Prometheus endpoint's HTTP server, if asked for
        self.stopped = asyncio.Event()
        self._background = BackgroundTasks("head")
        self.store = StoreShards(self._background.spawn, self.publish, lambda: self._stopping)
        self.deadlocks = DeadlockDetector()  # cycles of awaits among the nodes' actors
        self.names = ActorNames()
        self.state: HeadState | None = None
        self._saving = asyncio.Lock()  # views are saved in the order they were made

    # ---- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> aio.Server:
        restored = await self._open_state()
        port = self.options.port
        if restored is not None:  # where the nodes and drivers look for it
            port = int(session.read(self.session_dir).head_address.rpartition(":")[2])
        server, self.address = await start_server(
            self.options.host, port, [(HeadServicer(self), head_pb2.DESCRIPTOR.services_by_name["Head"])],
            self.token, self.tls,
        )
        if restored is None:
            for slot in range(self.options.nodes):
                self.slots[slot] = Slot(head_pb2.NodeInfo(slot=slot, epoch=0, managed=True))
                await self._launch(slot)
        else:
            await self._adopt(restored)
        self._warm = WarmNodes(self._node_argv(), self._node_env(), self._logs() / "node-spare.log",
                               self._background.spawn)
        self._warm.keep(self._spares_wanted())
        self._background.spawn(self._check_heartbeats())
        if self.parent_pid:
            self._background.spawn(self._watch_parent())
        if self.options.metrics_port is not None:
            loop = asyncio.get_running_loop()

            async def stats() -> head_pb2.ClusterStatsReply:
                return self.cluster_stats()

            # Scrapes come on the endpoint's thread; the stats are read on the loop, which changes them.
            self._metrics = serve_metrics(self.options.host, self.options.metrics_port,
                                          lambda: asyncio.run_coroutine_threadsafe(stats(), loop).result(5.0))
            log.info("Prometheus metrics on http://%s:%d/metrics", self.options.host, self._metrics.server_port)
        session.write(Session(self.address, self.token, os.getpid(), str(self.session_dir), children.supervisor_pid()))
        children.serving()
        self._background.spawn(children.tell_alive(ALIVE_EVERY_S))
        store = "an external lineage store" if self.options.store_url else f"{len(self.store.shards)} store shards"
        log.info("head %sserving on %s with %d nodes and %s", "restarted, " if restored else "", self.address,
                 len(self.slots), store)
        return server

    async def _open_state(self) -> Restored | None:
        """Start the store shards (or adopt a former head's) and the cluster's state in the store:
        a new one, or, restarted, the one read back (returned)."""
        if not self.options.store_url:
            if self.restarted:
                await self.store.adopt(self.session_dir)
            else:
                await self.store.start(self.session_dir, self.options.host, self.options.store_shards)
        self.state = HeadState(open_store(self.options.store_url, self.store.addresses, self.store.password))
        if not self.restarted:
            self.cluster_id = os.urandom(8)
            incarnation = await self.state.create(self.cluster_id)
            restored = None
        else:
            started = time.perf_counter()
            restored = await self.state.resume()
            self.cluster_id, incarnation = restored.cluster_id, restored.incarnation
            self.names = ActorNames(restored.names, restored.killed)
            log.info("read the cluster's state back (incarnation %d: %d nodes, %d named actors) in %.1f ms",
                     incarnation, len(restored.view.nodes) if restored.view else 0, len(restored.names),
                     (time.perf_counter() - started) * 1e3)
        # Views are numbered after the head's incarnation: a restarted head's are newer than any before.
        self.revision = incarnation << 32
        return restored

    async def _adopt(self, restored: Restored) -> None:
        """Take over the slots ``restored`` names: nodes that still run go on (their heartbeats are
        due from now on), the managed ones whose process is gone restart."""
        view = restored.view or head_pb2.ClusterView()
        self.rollbacks = view.rollbacks
        self.drivers.restore(list(view.drivers), list(view.departed_drivers))
        now = asyncio.get_running_loop().time()
        for info in view.nodes:
            # Its predecessor may have granted it a lease just before it died.
            s = self.slots[info.slot] = Slot(info, last_heartbeat=now, granted_until=now + self.lease_s)
            if not info.managed:
                continue  # it comes back by itself, or misses its heartbeats
            if info.state == head_pb2.DEAD:  # its restart was due when the head died
                self._background.spawn(self._launch(info.slot))
            elif info.pid:
                s.process = Child(info.pid, info.process_started)
                self._background.spawn(self._watch_process(info.slot, info.epoch, s.process))
            else:  # its epoch was taken, its process never started
                self._background.spawn(self.node_failed(info.slot, info.epoch, "not started when the head died"))
        self._background.spawn(self._drivers_back())
        await self._save()

    async def _drivers_back(self) -> None:
        """The drivers connected to the head before this one have a while to come back (they retry
        every second at most); the others left (what they owned is gone)."""
        await asyncio.sleep(max(self.options.heartbeat_timeout, DRIVERS_BACK_S))
        self.drivers.missing()

    async def _save(self) -> None:
        """Write the view as it is now to the store (before anyone acts on it). A head that another
        has replaced meanwhile exits at once, acting no further."""
        view = self.view()
        async with self._saving:
            try:
                await self.state.save_view(view)
            except SupersededError as exc:
                log.critical("%s; exiting", exc)
                os._exit(SUPERSEDED_EXIT)

    async def stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        self.publish()  # nodes (those added by hand too) exit, drivers fail what waits
        if self._metrics is not None:
            self._metrics.shutdown()
        if self._warm is not None:
            self._warm.stop()
        await asyncio.gather(*(s.process.stop(3.0) for s in self.slots.values() if s.process is not None))
        await self.store.stop()
        if self.state is not None:
            await self.state.store.aclose()
        session.remove(self.session_dir)
        self.stopped.set()

    async def _launch(self, slot: int) -> None:
        s = self.slots[slot]
        s.info.epoch += 1
        s.info.state = head_pb2.STARTING
        if s.info.address:
            s.info.former_addresses.append(s.info.address)
        s.info.address, s.info.pid = "", 0
        await self._save()  # the epoch is taken before a process can hold it
        log_path = self._logs() / f"node-{slot}.log"
        s.process = await self._warm.take(slot, log_path) if self._warm is not None else None
        if s.process is None:
            try:
                s.process = await start_child([*self._node_argv(), "--slot", str(slot)], self._node_env(), log_path)
            except (ClusterError, OSError) as exc:  # fork failed, or the supervisor could not: later, again
                await self.node_failed(slot, s.info.epoch, f"its process could not start: {exc}")
                return
        s.info.pid, s.info.process_started = s.process.pid, s.process.started
        self._background.spawn(self._watch_process(slot, s.info.epoch, s.process))
        await self._save()
        self.publish()

    def _logs(self) -> Path:
        logs = self.session_dir / session.LOGS_DIR
        logs.mkdir(parents=True, exist_ok=True)
        return logs

    def _node_argv(self) -> list[str]:
        return [sys.executable, "-m", "actorrt.cluster.node", "--head", self.address, "--host", self.options.host]

    def _node_env(self) -> dict[str, str]:
        # As the node wants it (no re-exec), with the token and this head's TLS files.
        return dict(node_environment(os.environ), **{TOKEN_ENV: self.token}, **(self.tls.env() if self.tls else {}))

    def _spares_wanted(self) -> int:
        """Warm node processes to keep: one for the restart of a failed node, or, under global
        rollback (which restarts every node at once), one per node, so that the baseline restarts
        as fast as the lineage stash does."""
        if not self.options.nodes:
            return 0
        return self.options.nodes if self.mode.rolls_back else 1

    async def _watch_process(self, slot: int, epoch: int, process: Child) -> None:
        await process.wait()
        await self.node_failed(slot, epoch, "its process exited")

    async def node_failed(self, slot: int, epoch: int, reason: str) -> None:
        s = self.slots.get(slot)
        if s is None or s.info.epoch != epoch or s.info.state == head_pb2.DEAD or self._stopping:
            return
        log.warning("node %d (epoch %d) failed: %s", slot, epoch, reason)
        s.info.last_failure = f"{time.strftime('%H:%M:%S')} {reason}"
        never_started = s.info.state == head_pb2.STARTING
        if s.process is not None:
            s.process.kill()  # fail-stop: a node declared dead must not keep running
        s.failed_at = asyncio.get_running_loop().time()
        s.detection_ms = (s.failed_at - (s.killed_at if s.killed_at is not None else s.last_heartbeat)) * 1e3
        s.killed_at = None
        s.info.state = head_pb2.DEAD
        await self._fence(s, epoch)
        rollback = self.mode.rolls_back and not never_started
        self.rollbacks += rollback
        if not s.info.managed and self.mode.logs_lineage:
            self._choose_heir(s)
        if rollback:
            self._roll_back_everyone(slot)
        await self._save()
        self.publish()
        if s.info.managed:
            s.restart_delay = min(max(0.5, 2 * s.restart_delay), MAX_RESTART_DELAY_S) if never_started else 0.0
            if s.restart_delay:
                log.warning("node %d died before registering; restarting in %.1f s", slot, s.restart_delay)
                await asyncio.sleep(s.restart_delay)
                if self._stopping or s.info.epoch != epoch:
                    return
            await self._launch(slot)

    async def _fence(self, s: Slot, epoch: int) -> None:
        """Make sure the incarnation acts no more before anyone hears it is dead: a process of the
        head's own was killed above, and has exited once this returns; for another, the store
        grants it no further lease, and the head waits out one it may still hold."""
        if s.process is not None:
            await s.process.wait()
            return
        from_store = await store_lease.fence(self.state.store, s.info.slot, epoch)
        remaining = max(from_store, s.granted_until - asyncio.get_running_loop().time())
        if remaining > 0:
            log.warning("node %d (epoch %d) may act for %.1f s more under its lease; waiting",
                        s.info.slot, epoch, remaining)
            await asyncio.sleep(remaining)

    def _choose_heir(self, dead: Slot) -> None:
        """A node the head cannot restart (added by hand) died: the live node hosting the fewest
        actors inherits its actors, and those of the slots it had inherited, rebuilding them by
        replay; tasks for them go there from now on."""
        alive = [s for s in self.slots.values() if s.info.state == head_pb2.ALIVE]
        if not alive:
            log.error("node %d will not come back and no live node can inherit its actors", dead.info.slot)
            return
        heir = min(alive, key=lambda s: (len(s.stats.actors), s.info.slot)).info.slot
        for s in self.slots.values():
            if s is dead or (s.info.HasField("heir") and s.info.heir == dead.info.slot):
                s.info.heir = heir
        log.warning("node %d will not come back: node %d inherits its actors", dead.info.slot, heir)

    def _roll_back_everyone(self, failed: int) -> None:
        """The global-rollback baseline: every other node goes too, and each restarts from the last
        global checkpoint. They are declared dead in the same view as the failed one, so that no
        process sends work to a node that is about to go back (a checkpoint taken there would
        replace the one the rollback restores)."""
        for other in self.slots.values():
            if other.info.slot == failed or other.info.state != head_pb2.ALIVE:
                continue
            if other.process is None:
                log.error("node %d was not started by this head and cannot be rolled back", other.info.slot)
                continue
            log.warning("rolling node %d back to the last global checkpoint", other.info.slot)
            other.process.kill()
            other.info.state = head_pb2.DEAD
            other.info.last_failure = f"{time.strftime('%H:%M:%S')} rolled back: node {failed} failed"
            other.failed_at = asyncio.get_running_loop().time()
            other.detection_ms = 0.0
            self._background.spawn(self._launch(other.info.slot))

    async def _check_heartbeats(self) -> None:
        loop = asyncio.get_running_loop()
        last = loop.time()
        while True:
            await asyncio.sleep(HEARTBEAT_CHECK_S)
            now = loop.time()
            if now - last > PAUSED_AFTER_S:
                # The head itself did not run (stopped, or starved): the heartbeats it missed meanwhile
                # say nothing about the nodes, which kept their leases from the store.
                log.warning("the head was paused for %.1f s; every node gets a fresh heartbeat timeout", now - last)
                for s in self.slots.values():
                    s.last_heartbeat = now
            last = now
            for s in list(self.slots.values()):
                if s.info.state == head_pb2.ALIVE and now - s.last_heartbeat > self.options.heartbeat_timeout:
                    self._background.spawn(self.node_failed(s.info.slot, s.info.epoch, "missed heartbeats"))
            self._find_deadlocks(now)

    def _find_deadlocks(self, now: float) -> None:
        for deadlock in self.deadlocks.check(now):  # suspected cycles to confirm, and confirmed ones
            if not deadlock.suspected:
                log.warning("deadlock: %s", deadlock.message)
            self._broadcast(head_pb2.HeadUpdate(deadlock=deadlock))

    async def _watch_parent(self) -> None:
        while os.getppid() == self.parent_pid:
            await asyncio.sleep(0.5)
        log.warning("the process that started the head is gone; stopping")
        await self.stop()

    # ---- view ---------------------------------------------------------------------------------

    def view(self) -> head_pb2.ClusterView:
        return head_pb2.ClusterView(
            revision=self.revision,
            nodes=[s.info for _, s in sorted(self.slots.items())],
            store_shards=self.store.in_view(),
            store_password=self.store.password,
            fault_tolerance=self.options.fault_tolerance.to_proto(),
            store_url=self.options.store_url,
            drivers=sorted(self.drivers.connected),
            departed_drivers=self.drivers.departed,
            rollbacks=self.rollbacks,
            cluster_id=self.cluster_id,
            head_grace_s=self.options.head_grace,
            stopping=self._stopping,
        )

    def publish(self) -> None:
        """Send the view, one revision newer, to every subscriber (and save it: the changes that
        must be in the store before anyone hears of them were saved already)."""
        self.revision += 1
        self._broadcast(head_pb2.HeadUpdate(view=self.view()))
        if self.state is not None and not self._stopping:
            self._background.spawn(self._save())

    def _broadcast(self, update: head_pb2.HeadUpdate) -> None:
        for queue in self._subscribers:
            queue.put_nowait(update)

    # ---- what the RPCs ask ----------------------------------------------------------------------

    async def register(self, request: head_pb2.RegisterNodeRequest) -> head_pb2.RegisterNodeReply:
        """A node process joins: the restart of a managed slot, or a new slot (``slot`` < 0)."""
        if not request.address:
            raise InvalidRequestError("RegisterNode needs the node's address")
        if request.slot < 0:
            slot = max(self.slots, default=-1) + 1
            self.slots[slot] = Slot(head_pb2.NodeInfo(slot=slot, epoch=1, managed=False))
        else:
            slot = request.slot
            s = self.slots.get(slot)
            if s is None or s.info.state != head_pb2.STARTING or s.info.pid != request.pid:
                raise InvalidRequestError(f"slot {slot} is not waiting for process {request.pid}")
        s = self.slots[slot]
        s.info.state = head_pb2.ALIVE
        s.info.address, s.info.pid, s.info.hostname = request.address, request.pid, request.hostname
        s.info.host_id = request.host_id
        s.last_heartbeat = asyncio.get_running_loop().time()
        s.granted_until = s.last_heartbeat + self.lease_s
        if self.mode.logs_lineage:  # dead slots that found no heir when they died
            for orphan in self.slots.values():
                if orphan.info.state == head_pb2.DEAD and not orphan.info.managed and not orphan.info.HasField("heir"):
                    self._choose_heir(orphan)
        await self._save()
        self.publish()
        restart_ms = (s.last_heartbeat - s.failed_at) * 1e3 if s.info.epoch > 1 else 0.0
        return head_pb2.RegisterNodeReply(slot=slot, epoch=s.info.epoch, view=self.view(),
                                          detection_ms=s.detection_ms, restart_ms=restart_ms, lease_s=self.lease_s)

    def subscribe(self) -> asyncio.Queue[head_pb2.HeadUpdate]:
        """A queue that gets the current view now and every view after it."""
        queue: asyncio.Queue[head_pb2.HeadUpdate] = asyncio.Queue()
        queue.put_nowait(head_pb2.HeadUpdate(view=self.view()))
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[head_pb2.HeadUpdate]) -> None:
        self._subscribers.discard(queue)

    @property
    def lease_s(self) -> float:
        """What each accepted heartbeat grants its node (see ``actorrt.util.lease``)."""
        return self.options.heartbeat_timeout * LEASE_FRACTION

    def heartbeat(self, beat: head_pb2.Heartbeat) -> bool:
        """A node's heartbeat; False if it names no live incarnation (it gets no lease then)."""
        s = self.slots.get(beat.slot)
        if s is None or s.info.epoch != beat.epoch or s.info.state != head_pb2.ALIVE:
            return False
        s.last_heartbeat = asyncio.get_running_loop().time()
        s.granted_until = s.last_heartbeat + self.lease_s  # it counts from when it sent the beat: sooner
        s.stats = beat.stats
        self.deadlocks.observe(beat.slot, beat.awaits, beat.confirmed, s.last_heartbeat)
        return True

    def member_lost(self, slot: int, epoch: int) -> None:
        """A node's heartbeat stream closed: it failed, or is failing."""
        self._background.spawn(self.node_failed(slot, epoch, "heartbeat stream closed"))

    def kill(self, slot: int) -> int:
        """SIGKILL a managed node (a fault injection); returns its pid."""
        s = self.slots.get(slot)
        if s is None or s.info.state != head_pb2.ALIVE:
            raise InvalidRequestError(f"node {slot} is not alive")
        if s.process is None:
            raise InvalidRequestError(f"node {slot} was not started by this head; stop it on its own machine")
        s.killed_at = asyncio.get_running_loop().time()
        s.process.kill()
        return s.process.pid

    def cluster_stats(self) -> head_pb2.ClusterStatsReply:
        stats = [s.stats for _, s in sorted(self.slots.items()) if s.info.state == head_pb2.ALIVE]
        return head_pb2.ClusterStatsReply(view=self.view(), nodes=stats)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@head_options
@click.option("--session-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Session directory (default: $ACTORRT_SESSION_DIR, else ~/.actorrt).")
@click.option("--parent-pid", type=int, default=None, help="Stop when this process exits.")
@click.option("--restarted", is_flag=True, help="Take over the cluster a head before this one ran in the session "
              "directory (its supervisor restarts a head that died with this).")
def main(head: HeadOptions, session_dir: Path | None, parent_pid: int | None, restarted: bool) -> None:
    """Run a head in the foreground, with the cluster token in ACTORRT_TOKEN (and TLS files in
    ACTORRT_TLS_CERT, ACTORRT_TLS_KEY and ACTORRT_TLS_CA for mutual TLS)."""
    token, tls = daemon_setup("actorrt.cluster.head")

    async def amain() -> None:
        supervisor = Head(token, session_dir or session.default_dir(), head, parent_pid, tls, restarted)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, lambda: asyncio.ensure_future(supervisor.stop()))
        server = await supervisor.start()
        await supervisor.stopped.wait()
        await server.stop(0.5)

    uvloop.run(amain())


if __name__ == "__main__":
    main()
