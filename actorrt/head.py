"""The head process: membership, failure detection, node-slot restarts, the store shards.

Run as ``python -m actorrt.head [--host H] [--port P] [--nodes N] [--store-shards K]
--session-dir D`` with the cluster token in ``ACTORRT_TOKEN``. It starts K redis-server shards and
N node processes (its *managed* slots), writes the session file, and publishes a ``ClusterView``
to every subscriber whenever membership changes. A managed node that dies is detected at once
(its process exits and its stream closes) and its slot restarts with a new epoch.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import uvloop
from grpc import aio

from actorrt import session
from actorrt.background import BackgroundTasks
from actorrt.fault_tolerance import DEFAULT_STASH_LIMIT, LOGGING_MODES, MODES, FaultToleranceOptions
from actorrt.processes import NODE_HASH_SEED, daemon_setup, spawn
from actorrt.redis_shards import RedisShard
from actorrt.rpc import head_pb2, node_pb2
from actorrt.session import TOKEN_ENV, Session
from actorrt.store import STORE_URL_ENV, parse_store_url
from actorrt.transport import InvalidRequestError, check_message, start_server

log = logging.getLogger("actorrt.head")

# A node that sends no heartbeat for this long is declared dead. Crashes and kills are seen at
# once (process exit, stream close); this bound is for a node that hangs or is cut off. It is
# generous because a node running a long synchronous method also stops sending heartbeats.
HEARTBEAT_TIMEOUT_S = 10.0


# A slot whose process dies before registering is restarted after a growing pause (a node that
# cannot start, e.g. a broken environment, must not be relaunched in a tight loop). A node that
# fails after registering is restarted at once.
MAX_RESTART_DELAY_S = 30.0


@dataclass
class Slot:
    info: head_pb2.NodeInfo
    process: asyncio.subprocess.Process | None = None
    restart_delay: float = 0.0
    last_heartbeat: float = 0.0
    killed_at: float | None = None  # KillNode sent SIGKILL then (loop time)
    failed_at: float = 0.0  # declared dead then
    detection_ms: float = 0.0  # from the kill (or the last heartbeat) to the declaration
    stats: node_pb2.NodeStatsReply = field(default_factory=node_pb2.NodeStatsReply)


class Head:
    def __init__(self, token: str, host: str, session_dir: Path, num_nodes: int, store_shards: int,
                 parent_pid: int | None = None, heartbeat_timeout: float = HEARTBEAT_TIMEOUT_S,
                 fault_tolerance: FaultToleranceOptions = FaultToleranceOptions(),
                 store_url: str = "") -> None:
        self.token = token
        self.host = host
        self.session_dir = session_dir
        self.num_nodes = num_nodes
        self.num_shards = store_shards
        self.parent_pid = parent_pid
        self.heartbeat_timeout = heartbeat_timeout
        if not fault_tolerance.checkpoint_dir:
            fault_tolerance = replace(fault_tolerance, checkpoint_dir=str(Path(session_dir).absolute() / "checkpoints"))
        self.fault_tolerance = fault_tolerance
        self.store_url = store_url
        if store_url:
            parse_store_url(store_url)  # a bad URL stops the head here, not every node later
        self.address = ""
        self.slots: dict[int, Slot] = {}
        self.shards: list[RedisShard] = []
        self.shard_restarts: list[int] = []
        self.rollbacks = 0
        self.store_password = session.new_token()
        self.revision = 0
        self._subscribers: set[asyncio.Queue[head_pb2.ClusterView]] = set()
        self.drivers: dict[str, int] = {}  # driver address -> its open subscriptions
        self._stopping = False
        self.stopped = asyncio.Event()
        self._background = BackgroundTasks("head")

    # ---- lifecycle ----------------------------------------------------------------------------

    async def start(self, port: int) -> aio.Server:
        server, self.address = await start_server(
            self.host, port, [(self, head_pb2.DESCRIPTOR.services_by_name["Head"])], self.token
        )
        if not self.store_url:
            self.shards = list(await asyncio.gather(*(
                RedisShard.start(self.session_dir / f"store-{i}", self.store_password, self.host)
                for i in range(self.num_shards)
            )))
            self.shard_restarts = [0] * self.num_shards
            for i in range(self.num_shards):
                self._background.spawn(self._supervise_shard(i))
        for slot in range(self.num_nodes):
            self.slots[slot] = Slot(head_pb2.NodeInfo(slot=slot, epoch=0, managed=True))
            await self._launch(slot)
        self._background.spawn(self._check_heartbeats())
        if self.parent_pid:
            self._background.spawn(self._watch_parent())
        session.write(Session(self.address, self.token, os.getpid(), str(self.session_dir)))
        log.info("head serving on %s with %d nodes and %d store shards", self.address, self.num_nodes, self.num_shards)
        return server

    async def stop(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        for s in self.slots.values():
            if s.process is not None and s.process.returncode is None:
                s.process.terminate()
        for s in self.slots.values():
            if s.process is not None:
                try:
                    await asyncio.wait_for(s.process.wait(), 3.0)
                except TimeoutError:
                    s.process.kill()
        await asyncio.gather(*(shard.stop() for shard in self.shards))
        session.remove(self.session_dir)
        self.stopped.set()

    async def _launch(self, slot: int) -> None:
        s = self.slots[slot]
        s.info.epoch += 1
        s.info.state = head_pb2.STARTING
        s.info.address, s.info.pid = "", 0
        logs = self.session_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, **{TOKEN_ENV: self.token, "PYTHONHASHSEED": NODE_HASH_SEED})  # no re-exec to set it
        argv = [sys.executable, "-m", "actorrt.node", "--head", self.address, "--slot", str(slot), "--host", self.host]
        s.process = await spawn(argv, env, logs / f"node-{slot}.log")
        s.info.pid = s.process.pid
        self._background.spawn(self._watch_process(slot, s.info.epoch, s.process))
        self._publish()

    async def _watch_process(self, slot: int, epoch: int, process: asyncio.subprocess.Process) -> None:
        code = await process.wait()
        await self.node_failed(slot, epoch, f"process exited with {code}")

    async def node_failed(self, slot: int, epoch: int, reason: str) -> None:
        s = self.slots.get(slot)
        if s is None or s.info.epoch != epoch or s.info.state == head_pb2.DEAD or self._stopping:
            return
        log.warning("node %d (epoch %d) failed: %s", slot, epoch, reason)
        never_started = s.info.state == head_pb2.STARTING
        if s.process is not None and s.process.returncode is None:
            s.process.kill()  # fail-stop: a node declared dead must not keep running
        s.failed_at = asyncio.get_running_loop().time()
        s.detection_ms = (s.failed_at - (s.killed_at if s.killed_at is not None else s.last_heartbeat)) * 1e3
        s.killed_at = None
        s.info.state = head_pb2.DEAD
        rollback = self.fault_tolerance.mode == "checkpoint" and not never_started
        self.rollbacks += rollback
        if not s.info.managed and self.fault_tolerance.mode in LOGGING_MODES:
            self._choose_heir(s)
        self._publish()
        if rollback:
            self._roll_back_everyone(slot)
        if s.info.managed:
            s.restart_delay = min(max(0.5, 2 * s.restart_delay), MAX_RESTART_DELAY_S) if never_started else 0.0
            if s.restart_delay:
                log.warning("node %d died before registering; restarting in %.1f s", slot, s.restart_delay)
                await asyncio.sleep(s.restart_delay)
                if self._stopping or s.info.epoch != epoch:
                    return
            await self._launch(slot)

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
        global checkpoint (their process exits are handled like any failure)."""
        for other in self.slots.values():
            if other.info.slot == failed or other.info.state != head_pb2.ALIVE:
                continue
            if other.process is None:
                log.error("node %d was not started by this head and cannot be rolled back", other.info.slot)
                continue
            log.warning("rolling node %d back to the last global checkpoint", other.info.slot)
            other.killed_at = asyncio.get_running_loop().time()
            other.process.kill()

    async def _supervise_shard(self, i: int) -> None:
        """Restart a store shard that dies, on its address and from its append-only file: every
        write it acked is there again. Flushers retry meanwhile (tasks go on, up to the stash bound)."""
        while True:
            shard = self.shards[i]
            code = await shard.process.wait()
            if self._stopping:
                return
            log.warning("store shard %d (%s) exited with %s; restarting it from its append-only file",
                        i, shard.address, code)
            try:
                self.shards[i] = await RedisShard.start(shard.directory, shard.password, shard.host, port=shard.port)
            except Exception as exc:  # noqa: BLE001 - whatever it is, the shard must come back
                log.exception("store shard %d could not restart: %s; retrying", i, exc)
                await asyncio.sleep(1.0)
                continue
            self.shard_restarts[i] += 1
            self._publish()

    async def _check_heartbeats(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(0.1)
            now = loop.time()
            for s in list(self.slots.values()):
                if s.info.state == head_pb2.ALIVE and now - s.last_heartbeat > self.heartbeat_timeout:
                    await self.node_failed(s.info.slot, s.info.epoch, "missed heartbeats")

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
            store_shards=[head_pb2.StoreShard(address=shard.address, pid=shard.process.pid, restarts=restarts)
                          for shard, restarts in zip(self.shards, self.shard_restarts, strict=True)],
            store_password=self.store_password,
            fault_tolerance=self.fault_tolerance.to_proto(),
            store_url=self.store_url,
            drivers=sorted(self.drivers),
            rollbacks=self.rollbacks,
        )

    def _publish(self) -> None:
        self.revision += 1
        view = self.view()
        for queue in self._subscribers:
            queue.put_nowait(view)

    # ---- RPCs ---------------------------------------------------------------------------------

    async def RegisterNode(self, request: head_pb2.RegisterNodeRequest, context) -> head_pb2.RegisterNodeReply:  # noqa: N802
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
        s.last_heartbeat = asyncio.get_running_loop().time()
        if self.fault_tolerance.mode in LOGGING_MODES:  # dead slots that found no heir when they died
            for orphan in self.slots.values():
                if orphan.info.state == head_pb2.DEAD and not orphan.info.managed and not orphan.info.HasField("heir"):
                    self._choose_heir(orphan)
        self._publish()
        restart_ms = (s.last_heartbeat - s.failed_at) * 1e3 if s.info.epoch > 1 else 0.0
        return head_pb2.RegisterNodeReply(slot=slot, epoch=s.info.epoch, view=self.view(),
                                          detection_ms=s.detection_ms, restart_ms=restart_ms)

    async def Subscribe(self, requests, context) -> None:  # noqa: N802
        queue: asyncio.Queue[head_pb2.ClusterView] = asyncio.Queue()
        queue.put_nowait(self.view())
        self._subscribers.add(queue)
        member: tuple[int, int] | None = None
        driver = ""
        loop = asyncio.get_running_loop()

        async def read() -> None:
            nonlocal member, driver
            async for beat in requests:
                await check_message(beat, context)
                s = self.slots.get(beat.slot)
                if beat.slot >= 0 and s is not None and s.info.epoch == beat.epoch:
                    member = (beat.slot, beat.epoch)
                    s.last_heartbeat = loop.time()
                    s.stats = beat.stats
                elif beat.slot < 0 and beat.address and not driver:
                    driver = beat.address
                    self.drivers[driver] = self.drivers.get(driver, 0) + 1
                    self._publish()

        reader = asyncio.ensure_future(read())
        try:
            while not reader.done():
                getter = asyncio.ensure_future(queue.get())
                await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    await context.write(getter.result())
                else:
                    getter.cancel()
            reader.result()
        finally:
            reader.cancel()
            self._subscribers.discard(queue)
            if driver:
                self.drivers[driver] -= 1
                if not self.drivers[driver]:
                    del self.drivers[driver]
                    self._publish()
            if member is not None:
                self._background.spawn(self.node_failed(*member, "heartbeat stream closed"))

    async def KillNode(self, request: head_pb2.KillNodeRequest, context) -> head_pb2.KillNodeReply:  # noqa: N802
        s = self.slots.get(request.slot)
        if s is None or s.info.state != head_pb2.ALIVE:
            raise InvalidRequestError(f"node {request.slot} is not alive")
        if s.process is None:
            raise InvalidRequestError(f"node {request.slot} was not started by this head; stop it on its own machine")
        s.killed_at = asyncio.get_running_loop().time()
        os.kill(s.process.pid, signal.SIGKILL)
        return head_pb2.KillNodeReply(pid=s.process.pid)

    async def ClusterStats(self, request, context) -> head_pb2.ClusterStatsReply:  # noqa: N802
        stats = [s.stats for _, s in sorted(self.slots.items()) if s.info.state == head_pb2.ALIVE]
        return head_pb2.ClusterStatsReply(view=self.view(), nodes=stats)

    async def Shutdown(self, request, context) -> head_pb2.ShutdownReply:  # noqa: N802
        await self.stop()
        return head_pb2.ShutdownReply()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="actorrt.head")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--store-shards", type=int, default=2)
    parser.add_argument("--session-dir", type=Path, default=session.default_dir())
    parser.add_argument("--parent-pid", type=int, default=None, help="stop when this process exits")
    parser.add_argument("--ft", choices=MODES, default="lineage_stash", help="lineage logging mode")
    parser.add_argument("--store-delay-ms", type=float, default=0.0, help="simulated lineage-store latency")
    parser.add_argument("--max-forwards", type=int, default=None, help="the paper's f (default: unlimited)")
    parser.add_argument("--stash-limit", type=int, default=DEFAULT_STASH_LIMIT, help="back-pressure bound")
    parser.add_argument("--checkpoint-dir", default="",
                        help="where actors write checkpoints (default: SESSION_DIR/checkpoints)")
    parser.add_argument("--heartbeat-timeout", type=float, default=HEARTBEAT_TIMEOUT_S,
                        help="seconds without heartbeats before a node is declared dead")
    args = parser.parse_args(argv)
    token = daemon_setup("actorrt.head")

    async def amain() -> None:
        head = Head(token, args.host, args.session_dir, args.nodes, args.store_shards, args.parent_pid,
                    args.heartbeat_timeout,
                    FaultToleranceOptions(args.ft, args.store_delay_ms, args.max_forwards,
                                          args.stash_limit, args.checkpoint_dir),
                    os.environ.get(STORE_URL_ENV, ""))
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, lambda: asyncio.ensure_future(head.stop()))
        server = await head.start(args.port)
        await head.stopped.wait()
        await server.stop(0.5)

    uvloop.run(amain())


if __name__ == "__main__":
    main()

