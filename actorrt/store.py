"""Async client of the lineage store: K Redis shards, keys spread by client-side sharding.

Keys are task IDs (already uniform hashes), so a key's shard is its leading 8 bytes modulo K and
any process computes the same placement. Writes are grouped per shard and sent as one pipeline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from actorrt.exceptions import ClusterError


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
        return int.from_bytes(key[:8], "big") % len(self._clients)

    def _by_shard(self, keys: Sequence[bytes]) -> dict[int, list[bytes]]:
        groups: dict[int, list[bytes]] = {}
        for key in keys:
            groups.setdefault(self.shard_of(key), []).append(key)
        return groups

    async def put_many(self, items: Mapping[bytes, bytes]) -> None:
        """Write every item; one pipelined round trip per shard, shards in parallel."""

        async def write(shard: int, keys: list[bytes]) -> None:
            async with self._clients[shard].pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.set(key, items[key])
                await pipe.execute()

        await self._gather(write(s, ks) for s, ks in self._by_shard(list(items)).items())

    async def get_many(self, keys: Sequence[bytes]) -> dict[bytes, bytes | None]:
        out: dict[bytes, bytes | None] = {}

        async def read(shard: int, ks: list[bytes]) -> None:
            out.update(zip(ks, await self._clients[shard].mget(ks), strict=True))

        await self._gather(read(s, ks) for s, ks in self._by_shard(keys).items())
        return out

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
