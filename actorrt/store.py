"""Async client of the lineage store: K Redis shards, keys spread by client-side sharding.

Keys end with a task ID (a uniform hash), so a key's shard is its last 8 bytes modulo K and any
process computes the same placement. Writes are grouped per shard and sent as one pipeline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from actorrt.exceptions import ClusterError

T = TypeVar("T")


class ShardedStore:
    def __init__(self, addresses: Sequence[str], password: str | None = None, retries: int = 3) -> None:
        if not addresses:
            raise ValueError("the lineage store needs at least one shard address")
        self.addresses = list(addresses)
        self._clients = []
        for address in self.addresses:
            host, _, port = address.rpartition(":")
            self._clients.append(aioredis.Redis(
                host=host, port=int(port), password=password, socket_connect_timeout=2.0,
                retry=Retry(ExponentialBackoff(cap=0.5, base=0.01), retries),
            ))

    def shard_of(self, key: bytes) -> int:
        return int.from_bytes(key[-8:], "big") % len(self._clients)

    def _by_shard(self, keys: Sequence[bytes]) -> dict[int, list[bytes]]:
        groups: dict[int, list[bytes]] = {}
        for key in keys:
            groups.setdefault(self.shard_of(key), []).append(key)
        return groups

    async def per_shard(
        self, keys: Sequence[bytes], fn: Callable[[aioredis.Redis, list[bytes]], Awaitable[T]]
    ) -> list[T]:
        """Run ``fn(shard_client, keys_of_that_shard)`` for every shard holding some of ``keys``,
        shards in parallel (one pipelined round trip each when ``fn`` uses a pipeline)."""
        return await self._gather(fn(self._clients[s], ks) for s, ks in self._by_shard(keys).items())

    async def ping(self) -> None:
        await self._gather(c.ping() for c in self._clients)

    async def _gather(self, coros) -> list:
        try:
            return await asyncio.gather(*coros)
        except aioredis.AuthenticationError as exc:
            raise ClusterError(f"the lineage store refused the password: {exc}") from exc
        except (aioredis.ConnectionError, OSError) as exc:
            raise ClusterError(f"lineage store unreachable ({', '.join(self.addresses)}): {exc}") from exc

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()
