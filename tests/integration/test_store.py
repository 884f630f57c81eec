"""The sharded lineage-store client against real redis-server shards."""

import os

import pytest
import redis.asyncio as aioredis
import redis.exceptions
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from actorrt import ids
from actorrt.exceptions import ClusterError
from actorrt.redis_shards import RedisShard
from actorrt.store import ShardedStore


@pytest.fixture
async def shards(tmp_path):
    started = [await RedisShard.start(tmp_path / f"s{i}", "pw") for i in range(3)]
    try:
        yield started
    finally:
        for shard in started:
            await shard.stop()


async def test_writes_spread_over_shards_and_read_back(shards):
    store = ShardedStore([s.address for s in shards], "pw")
    items = {ids.task_id(b"r", b"s", i): os.urandom(32) for i in range(300)}
    try:
        await store.put_many(items)
        assert await store.get_many(list(items)) == items
        per_shard = [await c.dbsize() for c in store._clients]
        assert sum(per_shard) == 300
        assert min(per_shard) > 50  # task IDs are uniform hashes
        for key in list(items)[:20]:
            assert await store._clients[store.shard_of(key)].get(key) == items[key]
    finally:
        await store.aclose()


async def test_wrong_password_is_refused(shards):
    store = ShardedStore([shards[0].address], "not-the-password")
    try:
        with pytest.raises(ClusterError, match="refused the password"):
            await store.ping()
    finally:
        await store.aclose()


async def test_unreachable_store_is_a_clear_error(shards):
    address = shards[0].address
    await shards[0].stop()
    store = ShardedStore([address], "pw")
    try:
        with pytest.raises(ClusterError, match="unreachable"):
            await store.put_many({b"k" * 16: b"v"})
    finally:
        await store.aclose()


async def test_shard_binds_loopback_and_requires_a_password(shards):
    client = aioredis.Redis(host=shards[0].host, port=shards[0].port, retry=Retry(NoBackoff(), 0))
    try:
        with pytest.raises(redis.exceptions.AuthenticationError):
            await client.set("k", "v")
        assert shards[0].host == "127.0.0.1"
    finally:
        await client.aclose()
