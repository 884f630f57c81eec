"""The lineage-store shards a head runs itself (when it is given no external store URL).

It starts K redis-server shards, each with an append-only file, and with ``replicas`` that many
replicas of each. A shard that dies is replaced by one of its replicas in sync, promoted (it holds
every write the shard acked: writes are acked once the replicas hold them), and a new replica
is started beside it; a shard without a replica in sync restarts on its address from its file,
which holds every write it acked as well. A replica that dies is replaced by a new one. Flushers
retry meanwhile (tasks go on, up to the stash bound), and follow a promoted replica to its address
when the view names it.

The view names the shards, their replicas, their password and how often each failed over or
restarted. What a restarted head needs to adopt them (addresses, pids, password) is in
``store.json`` in the session directory (readable by its owner only), rewritten at every change.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actorrt.cluster import session
from actorrt.exceptions import ClusterError
from actorrt.rpc import head_pb2
from actorrt.store.redis_server import RedisShard
from actorrt.store.tls import StoreTls
from actorrt.util.children import Child
from actorrt.util.files import write_atomically

log = logging.getLogger("actorrt.head")  # the head's own log, as the rest of what it does

STORE_RECORD = "store.json"
SYNC_POLL_S = 0.1


@dataclass
class _Shard:
    primary: RedisShard
    replicas: list[RedisShard] = field(default_factory=list)
    in_sync: set[int] = field(default_factory=set)  # pids of the replicas seen in sync
    restarts: int = 0  # from its append-only file
    failovers: int = 0  # a replica promoted in its place
    made: int = 0  # replicas started so far (their directories' numbers)


class StoreShards:
    def __init__(self, spawn: Callable[[Coroutine[Any, Any, Any]], Any], changed: Callable[[], None],
                 stopping: Callable[[], bool], tls: StoreTls | None = None, replicas: int = 0) -> None:
        self.password = session.new_token()
        self.tls = tls  # the shards serve TLS only, with the cluster's certificate
        self.replicas = replicas
        self._shards: list[_Shard] = []
        self._spawn = spawn  # the head's background tasks
        self._changed = changed  # a shard moved or serves again: the view changed
        self._stopping = stopping  # the head is stopping: a shard that exits stays down
        self._record: Path | None = None
        self._host = ""

    @property
    def shards(self) -> list[RedisShard]:
        return [s.primary for s in self._shards]

    @property
    def addresses(self) -> list[str]:
        return [s.primary.address for s in self._shards]

    async def start(self, session_dir: Path, host: str, count: int) -> None:
        self._host = host
        primaries = await asyncio.gather(*(
            RedisShard.start(session_dir / session.STORE_DIR.format(i), self.password, host, tls=self.tls)
            for i in range(count)))
        self._shards = [_Shard(primary) for primary in primaries]
        self._supervise_all(session_dir)

    async def adopt(self, session_dir: Path) -> None:
        """Take over the shards a head before this one ran in ``session_dir`` (one that is gone
        is replaced or restarts from its file, as any that dies)."""
        try:
            record = json.loads((session_dir / STORE_RECORD).read_text())
        except (OSError, ValueError) as exc:
            raise ClusterError(f"no record of the store shards in {session_dir}: {exc}") from None
        self.password = record["password"]
        self._host = record["host"]
        self._shards = []
        for s in record["shards"]:
            shard = _Shard(await self._adopted(s["primary"]), restarts=s["restarts"], failovers=s["failovers"],
                           made=s["made"])
            shard.replicas = [await self._adopted(r) for r in s["replicas"]]
            # Seen in sync by the head before (the shard may have died with it: one may be promoted).
            shard.in_sync = {r.process.pid for r in shard.replicas} & set(s["in_sync"])
            self._shards.append(shard)
        self._supervise_all(session_dir)
        # A shard lost meanwhile is replaced (by its replica, or restarted) before the head reads its state.
        while not all(s.primary.process.alive() for s in self._shards):
            await asyncio.sleep(0.05)

    async def _adopted(self, s: dict) -> RedisShard:
        # The one that serves its address (found by its pid: a head may have died restarting it),
        # else the recorded process (still loading its file, or gone: then replaced or restarted).
        directory = Path(s["directory"])
        found = await RedisShard.running(s["host"], s["port"], self.password, directory, self.tls)
        return found or RedisShard(s["host"], s["port"], self.password, directory, Child(s["pid"], s["started"]),
                                   self.tls)

    def _supervise_all(self, session_dir: Path) -> None:
        self._record = session_dir / STORE_RECORD
        self._save()
        for i in range(len(self._shards)):
            self._spawn(self._supervise(i))

    def _save(self) -> None:
        def entry(s: RedisShard) -> dict:
            return {"host": s.host, "port": s.port, "directory": str(s.directory), "pid": s.process.pid,
                    "started": s.process.started}

        shards = [{"primary": entry(s.primary), "replicas": [entry(r) for r in s.replicas], "restarts": s.restarts,
                   "failovers": s.failovers, "made": s.made, "in_sync": sorted(s.in_sync)} for s in self._shards]
        record = {"password": self.password, "host": self._host, "shards": shards}
        write_atomically(self._record, json.dumps(record).encode(), mode=0o600)  # it holds the password

    async def stop(self) -> None:
        await asyncio.gather(*(server.stop() for s in self._shards for server in (s.primary, *s.replicas)))

    def in_view(self) -> list[head_pb2.StoreShard]:
        return [head_pb2.StoreShard(address=s.primary.address, pid=s.primary.process.pid, restarts=s.restarts,
                                    replicas=[r.address for r in s.replicas], failovers=s.failovers)
                for s in self._shards]

    # ---- supervision ----------------------------------------------------------------------------

    async def _supervise(self, i: int) -> None:
        """Keep shard ``i`` serving, with its replicas, whatever of it dies."""
        shard = self._shards[i]
        for replica in shard.replicas:
            self._spawn(self._watch_sync(shard, replica))
        while True:
            await self._replace_lost_replicas(i)
            servers = [shard.primary, *shard.replicas]
            exits = [asyncio.ensure_future(server.process.wait()) for server in servers]
            try:
                await asyncio.wait(exits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in exits:
                    waiting.cancel()
            if self._stopping():
                return
            if not shard.primary.process.alive():
                await self._replace_primary(i)

    async def _replace_primary(self, i: int) -> None:
        shard = self._shards[i]
        lost = shard.primary
        heir = next((r for r in shard.replicas if r.process.pid in shard.in_sync and r.process.alive()), None)
        if heir is None and not any(lost.directory.glob("appendonly*")):
            # Its file is gone too: restarted, it would be empty, and its replicas would copy that.
            # A replica not yet seen in sync (the watch polls) may well be: it holds at least as much.
            heir = next((r for r in shard.replicas if r.process.alive()), None)
        if heir is not None:
            try:
                await heir.replicate(None)
            except Exception as exc:  # noqa: BLE001 - it may have died just now: restart the shard instead
                log.warning("store shard %d: its replica %s could not take over (%s)", i, heir.address, exc)
            else:
                log.warning("store shard %d (%s) exited; its replica %s took over", i, lost.address, heir.address)
                shard.replicas.remove(heir)
                shard.primary = heir
                shard.failovers += 1
                for replica in shard.replicas:  # the others follow the new primary
                    shard.in_sync.discard(replica.process.pid)
                    await _quietly(replica.replicate(heir))
                    self._spawn(self._watch_sync(shard, replica))
                self._save()
                self._changed()
                # Its file may hold writes no replica acked: they were never acked, and it does not come back.
                shutil.rmtree(lost.directory, ignore_errors=True)
                return
        log.warning("store shard %d (%s) exited; restarting it from its append-only file", i, lost.address)
        while not self._stopping():
            def started(new: RedisShard) -> None:  # recorded at once: a head dying now leaves no stray
                shard.primary = new
                self._save()

            try:
                await RedisShard.start(lost.directory, lost.password, lost.host, port=lost.port, on_started=started,
                                       tls=self.tls)
            except Exception as exc:  # noqa: BLE001 - whatever it is, the shard must come back
                log.exception("store shard %d could not restart: %s; retrying", i, exc)
                await asyncio.sleep(1.0)
                continue
            shard.restarts += 1
            for replica in shard.replicas:  # they sync with it afresh (a new replication history)
                shard.in_sync.discard(replica.process.pid)
                self._spawn(self._watch_sync(shard, replica))
            self._save()
            self._changed()
            return

    async def _replace_lost_replicas(self, i: int) -> None:
        """Start replicas until shard ``i`` has as many running as asked for."""
        shard = self._shards[i]
        for lost in [r for r in shard.replicas if not r.process.alive()]:
            log.warning("store shard %d: its replica %s exited; starting another", i, lost.address)
            shard.replicas.remove(lost)
            shard.in_sync.discard(lost.process.pid)
            shutil.rmtree(lost.directory, ignore_errors=True)
        changed = False
        while len(shard.replicas) < self.replicas and not self._stopping():
            shard.made += 1
            directory = shard.primary.directory.with_name(f"{session.STORE_DIR.format(i)}-r{shard.made}")

            def started(new: RedisShard) -> None:
                shard.replicas.append(new)
                self._save()

            try:
                replica = await RedisShard.start(directory, self.password, self._host, on_started=started,
                                                 tls=self.tls, replica_of=shard.primary)
            except Exception as exc:  # noqa: BLE001 - writes wait for it: try again
                log.exception("store shard %d: a replica could not start: %s; retrying", i, exc)
                shard.replicas = [r for r in shard.replicas if r.process.alive()]
                await asyncio.sleep(1.0)
                continue
            self._spawn(self._watch_sync(shard, replica))
            changed = True
        if changed:
            self._save()
            self._changed()

    async def _watch_sync(self, shard: _Shard, replica: RedisShard) -> None:
        """Count ``replica`` in sync once its link to the shard is up (then it may be promoted)."""
        while replica in shard.replicas and replica.process.alive():
            if await replica.in_sync():
                shard.in_sync.add(replica.process.pid)
                self._save()
                return
            await asyncio.sleep(SYNC_POLL_S)


async def _quietly(call: Coroutine[Any, Any, None]) -> None:
    try:
        await call
    except Exception as exc:  # noqa: BLE001 - a replica that cannot follow is replaced when it exits
        log.warning("a store replica could not follow its new primary: %s", exc)
