"""The lineage-store shards a head runs itself (when it is given no external store URL).

It starts K redis-server shards, each with an append-only file, and restarts one that dies on
its address and from that file: every write the shard acked is there again. Flushers retry
meanwhile (tasks go on, up to the stash bound). The view names the shards, their password and
how often each restarted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from actorrt.cluster import session
from actorrt.rpc import head_pb2
from actorrt.store.redis_server import RedisShard

log = logging.getLogger("actorrt.head")  # the head's own log, as the rest of what it does


class StoreShards:
    def __init__(self, spawn: Callable[[Coroutine[Any, Any, Any]], Any], restarted: Callable[[], None],
                 stopping: Callable[[], bool]) -> None:
        self.password = session.new_token()
        self.shards: list[RedisShard] = []
        self.restarts: list[int] = []
        self._spawn = spawn  # the head's background tasks
        self._restarted = restarted  # a shard is serving again: the view changed
        self._stopping = stopping  # the head is stopping: a shard that exits stays down

    async def start(self, session_dir: Path, host: str, count: int) -> None:
        self.shards = list(await asyncio.gather(*(
            RedisShard.start(session_dir / session.STORE_DIR.format(i), self.password, host) for i in range(count)
        )))
        self.restarts = [0] * count
        for i in range(count):
            self._spawn(self._supervise(i))

    async def stop(self) -> None:
        await asyncio.gather(*(shard.stop() for shard in self.shards))

    def in_view(self) -> list[head_pb2.StoreShard]:
        return [head_pb2.StoreShard(address=shard.address, pid=shard.process.pid, restarts=restarts)
                for shard, restarts in zip(self.shards, self.restarts, strict=True)]

    async def _supervise(self, i: int) -> None:
        """Restart shard ``i`` whenever it dies, on its address and from its append-only file."""
        while True:
            shard = self.shards[i]
            code = await shard.process.wait()
            if self._stopping():
                return
            log.warning("store shard %d (%s) exited with %s; restarting it from its append-only file",
                        i, shard.address, code)
            try:
                self.shards[i] = await RedisShard.start(shard.directory, shard.password, shard.host, port=shard.port)
            except Exception as exc:  # noqa: BLE001 - whatever it is, the shard must come back
                log.exception("store shard %d could not restart: %s; retrying", i, exc)
                await asyncio.sleep(1.0)
                continue
            self.restarts[i] += 1
            self._restarted()
