"""The lineage-store shards a head runs itself (when it is given no external store URL).

It starts K redis-server shards, each with an append-only file, and restarts one that dies on
its address and from that file: every write the shard acked is there again. Flushers retry
meanwhile (tasks go on, up to the stash bound). The view names the shards, their password and
how often each restarted. What a restarted head needs to adopt them (addresses, pids, password)
is in ``store.json`` in the session directory (readable by its owner only), rewritten whenever a
shard restarts.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine
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


class StoreShards:
    def __init__(self, spawn: Callable[[Coroutine[Any, Any, Any]], Any], restarted: Callable[[], None],
                 stopping: Callable[[], bool], tls: StoreTls | None = None) -> None:
        self.password = session.new_token()
        self.tls = tls  # the shards serve TLS only, with the cluster's certificate
        self.shards: list[RedisShard] = []
        self.restarts: list[int] = []
        self._spawn = spawn  # the head's background tasks
        self._restarted = restarted  # a shard is serving again: the view changed
        self._stopping = stopping  # the head is stopping: a shard that exits stays down
        self._record: Path | None = None

    @property
    def addresses(self) -> list[str]:
        return [shard.address for shard in self.shards]

    async def start(self, session_dir: Path, host: str, count: int) -> None:
        self.shards = list(await asyncio.gather(*(
            RedisShard.start(session_dir / session.STORE_DIR.format(i), self.password, host, tls=self.tls)
            for i in range(count)
        )))
        self.restarts = [0] * count
        self._supervise_all(session_dir)

    async def adopt(self, session_dir: Path) -> None:
        """Take over the shards a head before this one ran in ``session_dir`` (one that is gone
        restarts from its file, as any that dies)."""
        try:
            record = json.loads((session_dir / STORE_RECORD).read_text())
        except (OSError, ValueError) as exc:
            raise ClusterError(f"no record of the store shards in {session_dir}: {exc}") from None
        self.password = record["password"]
        self.shards = []
        for s in record["shards"]:
            # The one that serves its address (found by its pid: a head may have died restarting it),
            # else the recorded process (still loading its file, or gone: then restarted below).
            found = await RedisShard.running(s["host"], s["port"], self.password, Path(s["directory"]), self.tls)
            self.shards.append(found or RedisShard(s["host"], s["port"], self.password, Path(s["directory"]),
                                                   Child(s["pid"], s["started"]), self.tls))
        self.restarts = record["restarts"]
        self._supervise_all(session_dir)

    def _supervise_all(self, session_dir: Path) -> None:
        self._record = session_dir / STORE_RECORD
        self._save()
        for i in range(len(self.shards)):
            self._spawn(self._supervise(i))

    def _save(self) -> None:
        shards = [{"host": s.host, "port": s.port, "directory": str(s.directory), "pid": s.process.pid,
                   "started": s.process.started} for s in self.shards]
        record = {"password": self.password, "shards": shards, "restarts": self.restarts}
        write_atomically(self._record, json.dumps(record).encode(), mode=0o600)  # it holds the password

    async def stop(self) -> None:
        await asyncio.gather(*(shard.stop() for shard in self.shards))

    def in_view(self) -> list[head_pb2.StoreShard]:
        return [head_pb2.StoreShard(address=shard.address, pid=shard.process.pid, restarts=restarts)
                for shard, restarts in zip(self.shards, self.restarts, strict=True)]

    async def _supervise(self, i: int) -> None:
        """Restart shard ``i`` whenever it dies, on its address and from its append-only file."""
        while True:
            shard = self.shards[i]
            await shard.process.wait()
            if self._stopping():
                return
            log.warning("store shard %d (%s) exited; restarting it from its append-only file", i, shard.address)

            def started(new: RedisShard) -> None:  # recorded at once: a head dying now leaves no stray
                self.shards[i] = new
                self._save()

            try:
                await RedisShard.start(shard.directory, shard.password, shard.host, port=shard.port, on_started=started,
                                       tls=self.tls)
            except Exception as exc:  # noqa: BLE001 - whatever it is, the shard must come back
                log.exception("store shard %d could not restart: %s; retrying", i, exc)
                await asyncio.sleep(1.0)
                continue
            self.restarts[i] += 1
            self._save()
            self._restarted()
