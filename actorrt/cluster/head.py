"""The head: membership, failure detection, node-slot restarts, the store shards.

It runs in ``run_head.py``'s process, under a supervisor that restarts it. It starts K redis-server
shards and N node processes (its *managed* slots), writes the session file, and publishes a
``ClusterView`` to every subscriber whenever membership changes. A managed node that dies is
detected at once (its process exits and its stream closes) and its slot restarts with a new epoch.
What it decides it writes to the store first (``head_state.py``); a restarted head reads it back
and takes over (``takeover.py``). Its RPCs are served by ``HeadServicer`` (``head_service.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpc import aio

from actorrt.cluster import leadership, rollback_round, session, store_lease, takeover
from actorrt.cluster.actor_names import ActorNames
from actorrt.cluster.connected_drivers import ConnectedDrivers
from actorrt.cluster.deadlocks import DeadlockDetector
from actorrt.cluster.head_options import HeadOptions
from actorrt.cluster.head_service import HeadServicer
from actorrt.cluster.head_state import HeadState, Restored, SupersededError
from actorrt.cluster.metrics_endpoint import serve_metrics
from actorrt.cluster.node_processes import NodeProcesses
from actorrt.cluster.promotions import promoted
from actorrt.cluster.session import Session
from actorrt.cluster.slots import LEASE_FRACTION, MAX_RESTART_DELAY_S, Slot, heir_for, roll_back
from actorrt.cluster.store_shards import StoreShards
from actorrt.cluster.supervisor import ALIVE_EVERY_S, SUPERSEDED_EXIT
from actorrt.cluster.takeover import Takeover
from actorrt.dashboard.recoveries import FailureLog
from actorrt.exceptions import ClusterError
from actorrt.lineage.options import FaultToleranceMode
from actorrt.net.server import InvalidRequestError, start_server
from actorrt.net.tls import TlsFiles
from actorrt.objects.host import host_identity
from actorrt.rpc import head_pb2
from actorrt.store.opening import follow_view
from actorrt.util import children
from actorrt.util.background import BackgroundTasks
from actorrt.util.children import Child
from actorrt.util.ticks import ticks

if TYPE_CHECKING:
    from actorrt.dashboard.server import Dashboard

log = logging.getLogger("actorrt.head")

# Heartbeats are checked this often; a check this much later than due means the head itself was
# not running (SIGSTOP, a paused VM), not that the nodes were silent.
HEARTBEAT_CHECK_S = 0.1
PAUSED_AFTER_S = 1.0
# A rollback round waits this long at most for nodes restarting from an earlier one to register.
RESTARTS_AWAITED_S = 30.0
# A restarted head counts its predecessor's drivers as connected for at least this long.
DRIVERS_BACK_S = 10.0


class Head:
    def __init__(self, token: str, session_dir: Path, options: HeadOptions, tls: TlsFiles | None = None,
                 restarted: bool = False, standby: bool = False) -> None:
        self.token = token
        self.tls = tls
        self.session_dir = session_dir
        self.restarted = restarted  # a head before this one ran the cluster: take over its state
        self.standby = standby  # wait until the active head's lease runs out, then take its cluster over
        self.cluster_id = b""  # see ClusterView.cluster_id
        ft = options.fault_tolerance
        if not ft.checkpoint_dir:
            ft = replace(ft, checkpoint_dir=str(Path(session_dir).absolute() / session.CHECKPOINTS_DIR))
        self.options = replace(options, fault_tolerance=ft)
        options.check_store_url()
        self.mode = ft.mode
        self.address = ""
        self.slots: dict[int, Slot] = {}
        self.rollbacks = 0  # ft="checkpoint": failures that took every node back
        self.rollback_rounds = 0  # ft="checkpoint": failures the head decided a rollback for (any kind)
        self._rolling_back = asyncio.Lock()  # one round at a time
        self.first_calls: list[head_pb2.FirstCalls] = []  # the last round's (ClusterView.first_calls)
        self.rollback_manifest = 0  # and the global checkpoint its nodes restore
        self.revision = 0
        self.moved: dict[bytes, head_pb2.ActorMove] = {}  # actors their standbys serve now
        self._subscribers: set[asyncio.Queue[head_pb2.ClusterView]] = set()
        self.drivers = ConnectedDrivers(self.publish)
        self._stopping = False
        self.processes: NodeProcesses | None = None  # how node processes start (once the head serves)
        self._metrics: Any = None  # the Prometheus endpoint's HTTP server, if asked for
        self.metrics_url = ""  # and its address
        self.failures = FailureLog()  # what the dashboard's recoveries page shows
        self._dashboard: Dashboard | None = None
        self.dashboard_url = ""
        self.stopped = asyncio.Event()
        self._background = BackgroundTasks("head")
        self.store = StoreShards(self._background.spawn, self._store_moved, lambda: self._stopping,
                                 tls.for_store() if tls else None, 0 if options.store_url else options.store_replicas)
        self.deadlocks = DeadlockDetector()  # cycles of awaits among the nodes' actors
        self.names = ActorNames()
        self.state: HeadState | None = None
        self._leader: leadership.LeaderLease | None = None  # with an external store: the lease it holds
        self._saving = asyncio.Lock()  # views are saved in the order they were made

    # ---- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> aio.Server:
        former = session.read(self.session_dir) if self.restarted else None
        if self.restarted and former is None:
            raise ClusterError(f"no session file in {self.session_dir}: the address to serve on is lost")
        former_address = former.head_address if former is not None else ""
        if self.standby and not former_address:
            session.write(Session("", self.token, os.getpid(), str(self.session_dir), children.supervisor_pid(),
                                  standby=True))
            log.info("standing by to take over the cluster whose head's lease is in the store")
        restored = await self._open_state(former_address)
        # Where the nodes and drivers look for it: a restarted head serves where it did.
        port = int(former_address.rpartition(":")[2]) if former_address else self.options.port
        server, self.address = await start_server(
            self.options.host, port, [(HeadServicer(self), head_pb2.DESCRIPTOR.services_by_name["Head"])],
            self.token, self.tls,
        )
        if self.options.store_url:  # the active head from now on: nodes and drivers find it by the lease
            self._leader = leadership.LeaderLease(self.state.store, self.address, self.state.incarnation)
            if not await self._leader.take():
                leadership.step_down(SUPERSEDED_EXIT, "another head has taken over the cluster")
            self._background.spawn(self._leader.run(lambda: self._stopping))
        self.processes = NodeProcesses(self.address, self.options.host, self.token, self.tls, self.session_dir,
                                       self._background.spawn)
        if self.options.dashboard_port is not None:  # before any node: a port taken stops the head here
            try:
                await self._serve_dashboard(former.dashboard_url if former is not None else "")
            except ClusterError:
                await server.stop(0)
                raise
        if restored is None:
            for slot in range(self.options.nodes):
                self.slots[slot] = Slot(head_pb2.NodeInfo(slot=slot, epoch=0, managed=True))
                await self._launch(slot)
        else:
            await self._adopt(restored)
        self.processes.keep_warm(self._spares_wanted())
        self._background.spawn(self._check_heartbeats())
        if self.options.metrics_port is not None:
            self._metrics = serve_metrics(self.options.host, self.options.metrics_port, self.cluster_stats)
            self.metrics_url = f"http://{self.options.host}:{self._metrics.server_port}/metrics"
            log.info("Prometheus metrics on %s", self.metrics_url)
        session.write(Session(self.address, self.token, os.getpid(), str(self.session_dir), children.supervisor_pid(),
                              metrics_url=self.metrics_url, dashboard_url=self.dashboard_url))
        children.serving()
        self._background.spawn(children.tell_alive(ALIVE_EVERY_S))
        store = "an external lineage store" if self.options.store_url else f"{len(self.store.shards)} store shards"
        log.info("head %sserving on %s with %d nodes and %s", "restarted, " if restored else "", self.address,
                 len(self.slots), store)
        return server

    async def _serve_dashboard(self, former_url: str) -> None:
        # Imported here: aiohttp would cost every head that serves no dashboard 0.15 s at its start.
        from actorrt.dashboard.server import HeadSources, serve_dashboard

        sources = HeadSources(self.cluster_stats, lambda: self.state.store.shard_info(), self.heartbeat_ages,
                              self.failures, self.options.fault_tolerance.checkpoint_dir)
        self._dashboard = await serve_dashboard(sources, self.token, self.tls, self.options.dashboard_host,
                                                self.options.dashboard_port, self.restarted, former_url)
        self.dashboard_url = self._dashboard.url if self._dashboard is not None else ""

    async def _open_state(self, former_address: str) -> Restored | None:
        self.state, self.cluster_id, restored = await takeover.open_state(
            self.store, self.options, self.session_dir, self.restarted, self.standby, former_address)
        if restored is not None:
            self.names = ActorNames(restored.names, restored.killed)
        follow_view(self.state.store, self.view())  # a shard may have failed over since it was opened
        # Views are numbered after the head's incarnation: a restarted head's are newer than any before.
        self.revision = self.state.incarnation << 32
        return restored

    async def _adopt(self, restored: Restored) -> None:
        """Take over the slots a dead head's view names (``takeover.takeover_plan``)."""
        view = restored.view or head_pb2.ClusterView()
        self.rollbacks = view.rollbacks
        # A process frozen for a round its predecessor did not decide thaws (a later failure
        # freezes it again, and the round then sees what it ran meanwhile).
        self.rollback_rounds = view.rollback_rounds + 1
        self.first_calls = list(view.first_calls)
        self.rollback_manifest = view.rollback_manifest
        self.moved = {m.actor: m for m in view.moved_actors}
        self.drivers.restore(list(view.drivers), list(view.departed_drivers))
        now = asyncio.get_running_loop().time()
        for info, action in takeover.takeover_plan(view, host_identity()):
            # Its heartbeats are due from now on; its predecessor may have granted a lease just before it died.
            s = self.slots[info.slot] = Slot(info, last_heartbeat=now, granted_until=now + self.lease_s)
            if action is Takeover.LAUNCH:
                self._background.spawn(self._launch(info.slot))
            elif action is Takeover.ADOPT:
                s.process = Child(info.pid, info.process_started)
                self._background.spawn(self._watch_process(info.slot, info.epoch, s.process))
            elif action is Takeover.FAIL:
                self._background.spawn(self.node_failed(info.slot, info.epoch, "not started when the head died"))
        # They retry every second at most: those not back by then left (what they owned is gone).
        self._background.spawn(self.drivers.missing_after(max(self.options.heartbeat_timeout, DRIVERS_BACK_S)))
        await self._save()

    async def _save(self) -> None:
        """Write the view as it is now to the store (before anyone acts on it). A head that another
        has replaced meanwhile exits at once, acting no further."""
        view = self.view()
        async with self._saving:
            try:
                await self.state.save_view(view)
            except SupersededError as exc:
                leadership.step_down(SUPERSEDED_EXIT, str(exc))

    def _check_leadership(self) -> None:
        if self._leader is not None and not self._stopping:
            self._leader.check()

    async def stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        self.publish()  # nodes (those added by hand too) exit, drivers fail what waits
        if self._metrics is not None:
            self._metrics.shutdown()
        if self._dashboard is not None:
            await self._dashboard.stop()
        if self.processes is not None:
            self.processes.stop()
        await asyncio.gather(*(s.process.stop(3.0) for s in self.slots.values() if s.process is not None))
        await self.store.stop()
        if self.state is not None:
            if self.options.store_url:  # a standby must not take a stopped cluster over
                with contextlib.suppress(ClusterError):
                    await leadership.stopped(self.state.store, self.state.incarnation)
            await self.state.store.aclose()
        session.remove(self.session_dir)
        self.stopped.set()

    async def _launch(self, slot: int) -> None:
        self._check_leadership()
        s = self.slots[slot]
        s.info.epoch += 1
        s.info.state = head_pb2.STARTING
        if s.info.address:
            s.info.former_addresses.append(s.info.address)
        s.info.address, s.info.pid = "", 0
        await self._save()  # the epoch is taken before a process can hold it
        try:
            s.process = await self.processes.start(slot)
        except (ClusterError, OSError) as exc:  # fork failed, or the supervisor could not: later, again
            await self.node_failed(slot, s.info.epoch, f"its process could not start: {exc}")
            return
        s.info.pid, s.info.process_started = s.process.pid, s.process.started
        self._background.spawn(self._watch_process(slot, s.info.epoch, s.process))
        await self._save()
        self.publish()

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
        self._check_leadership()
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
        # (One that never registered sent no heartbeat: nothing to detect it from.)
        detected_ms = 0.0 if never_started else s.detection_ms
        self.failures.failed(slot, epoch, reason, time.time() - detected_ms / 1e3, detected_ms)
        s.killed_at = None
        s.info.state = head_pb2.DEAD
        await self._fence(s, epoch)
        rollback = self.mode.rolls_back and not never_started
        if self.mode.logs_lineage:
            await self._promote_standbys(slot, epoch)
        if not s.info.managed and self.mode.logs_lineage:
            self._choose_heir(s)
        if rollback:
            await self._roll_back(slot)
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

    async def _promote_standbys(self, failed: int, epoch: int) -> None:
        """The failed slot's actors that keep a standby on a live node move there, in the view that
        declares the failure (``promotions.py``)."""
        alive = {n for n, s in self.slots.items() if s.info.state == head_pb2.ALIVE}
        for move in await promoted(self.state.store, failed, epoch, alive, self.moved):
            self.moved[move.actor] = move

    def _choose_heir(self, dead: Slot) -> None:
        """A node the head cannot restart (added by hand) died: the live node hosting the fewest
        actors inherits its actors, and those of the slots it had inherited, rebuilding them by
        replay; tasks for them go there from now on."""
        heir = heir_for(self.slots.values())
        if heir is None:
            log.error("node %d will not come back and no live node can inherit its actors", dead.info.slot)
            return
        for s in self.slots.values():
            if s is dead or (s.info.HasField("heir") and s.info.heir == dead.info.slot):
                s.info.heir = heir
        log.warning("node %d will not come back: node %d inherits its actors", dead.info.slot, heir)

    async def _roll_back(self, failed: int) -> None:
        """``ft="checkpoint"``: the nodes the rollback frontier names go back to the last global
        checkpoint with the failed one (``rollback_round.py``), or, where it cannot tell, every
        node does (and ``rollbacks`` counts it). They are declared dead in the same view as the
        failed one, so that no process sends work to a node that is about to go back (a checkpoint
        taken there would replace the one the rollback restores); that view ends the round."""
        async with self._rolling_back:
            started = time.perf_counter()
            round_ = self.rollback_rounds + 1
            directory = self.options.fault_tolerance.checkpoint_dir
            if self.mode is FaultToleranceMode.GLOBAL_ROLLBACK:
                decided = await rollback_round.everyone_back({failed}, "ft='global_rollback'", directory)
            else:
                await self._restarts_registered()
                nodes = {s.info.slot: s.info.address for s in self.slots.values() if s.info.state == head_pb2.ALIVE}
                try:
                    decided = await rollback_round.decide(round_, nodes, list(self.drivers.connected), {failed},
                                                          directory, self.token, self.tls)
                except Exception as exc:  # noqa: BLE001 - a frozen cluster must be thawed whatever failed here
                    log.exception("the rollback round failed")
                    decided = await rollback_round.everyone_back({failed}, f"the rollback round failed: {exc!r}",
                                                                 directory)
            if decided.everyone:
                log.warning("every node goes back to the last global checkpoint: %s", decided.everyone)
                self.rollbacks += 1
                back = roll_back(self.slots.values(), failed, asyncio.get_running_loop().time())
            else:
                back = roll_back(self.slots.values(), failed, asyncio.get_running_loop().time(), decided.restart)
                log.warning("node %d failed: nodes %s go back to the last global checkpoint, %d others keep running",
                            failed, sorted({failed, *back}), len(nodes) - len(back))
            self.rollback_rounds = round_
            self.failures.rolled_back(failed, {slot: self.slots[slot].info.epoch for slot in back}, time.time(),
                                      (time.perf_counter() - started) * 1e3)
            self.first_calls = [head_pb2.FirstCalls(actor=a, sender=s, upto=n) for a, (s, n) in decided.first.items()]
            self.rollback_manifest = decided.manifest
            for slot in back:
                self._background.spawn(self._launch(slot))

    async def _restarts_registered(self) -> None:
        """Wait (a while) until no slot is starting: a node restarted by an earlier round that
        registers during this one would run its restored actors unfrozen and unreported."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RESTARTS_AWAITED_S
        while (any(s.info.state == head_pb2.STARTING and not s.restart_delay for s in self.slots.values())
               and loop.time() < deadline):
            await asyncio.sleep(0.02)

    async def _check_heartbeats(self) -> None:
        async for now, paused in ticks(HEARTBEAT_CHECK_S, PAUSED_AFTER_S):
            if paused:
                # The head itself did not run: the heartbeats it missed meanwhile say nothing about
                # the nodes, which kept their leases from the store.
                log.warning("the head was paused; every node gets a fresh heartbeat timeout")
                for s in self.slots.values():
                    s.last_heartbeat = now
            for s in list(self.slots.values()):
                if s.info.state == head_pb2.ALIVE and now - s.last_heartbeat > self.options.heartbeat_timeout:
                    self._background.spawn(self.node_failed(s.info.slot, s.info.epoch, "missed heartbeats"))
            self._find_deadlocks(now)

    def _find_deadlocks(self, now: float) -> None:
        for deadlock in self.deadlocks.check(now):  # suspected cycles to confirm, and confirmed ones
            if not deadlock.suspected:
                log.warning("deadlock: %s", deadlock.message)
            self._broadcast(head_pb2.HeadUpdate(deadlock=deadlock))

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
            rollback_rounds=self.rollback_rounds,
            first_calls=self.first_calls,
            rollback_manifest=self.rollback_manifest,
            cluster_id=self.cluster_id,
            head_grace_s=self.options.head_grace,
            stopping=self._stopping,
            store_tls=self.store.tls is not None and not self.options.store_url,
            store_replicas=self.options.store_replicas,
            moved_actors=[m for _, m in sorted(self.moved.items())],
        )

    def _store_moved(self) -> None:
        """A shard serves again, or its replica in its place: the head's own writes go there too."""
        if self.state is not None:
            follow_view(self.state.store, self.view())
        self.publish()

    def publish(self) -> None:
        """Send the view, one revision newer, to every subscriber (and save it: the changes that
        must be in the store before anyone hears of them were saved already)."""
        self._check_leadership()
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
        self._check_leadership()  # (it grants a lease)
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
        # (A node that has sent no heartbeat yet has no stats of its own incarnation.)
        stats = [s.stats for _, s in sorted(self.slots.items())
                 if s.info.state == head_pb2.ALIVE and s.stats.epoch == s.info.epoch]
        return head_pb2.ClusterStatsReply(view=self.view(), nodes=stats, metrics_url=self.metrics_url,
                                          named=self.names.all(), dashboard_url=self.dashboard_url,
                                          drivers=[head_pb2.DriverLineage(address=a, lineage=lineage)
                                                   for a, lineage in sorted(self.drivers.lineage.items())])

    def heartbeat_ages(self) -> dict[int, float]:
        now = asyncio.get_running_loop().time()
        return {slot: now - s.last_heartbeat for slot, s in self.slots.items() if s.info.state == head_pb2.ALIVE}
