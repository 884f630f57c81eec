"""The lineage store on a real Redis Cluster (three redis-server nodes), directly and under a cluster."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

import actorrt
from actorrt.core import context
from actorrt.lineage import ids
from actorrt.rpc import common_pb2 as pb
from actorrt.store.clients import ClusterStore
from actorrt.store.lineage_store import LineageStore
from actorrt.store.opening import open_store
from tests.support.redis_cluster import RedisCluster


def whole(specs):
    """Writes of ``specs`` whole (not as the delta of their version)."""
    return [(s, True) for s in specs]


@pytest.fixture
async def redis_cluster(tmp_path):
    cluster = await RedisCluster.start(tmp_path / "cluster", "pw", size=3)
    try:
        yield cluster
    finally:
        await cluster.stop()


def spec(i: int, version: int = 0, method: str = "m") -> pb.TaskSpec:
    return pb.TaskSpec(task_id=ids.task_id(b"r", b"s", i), receiver=b"r", version=version, method=method)


async def _keys_per_node(cluster: RedisCluster) -> list[int]:
    counts = []
    for node in cluster.nodes:
        client = aioredis.Redis(host=node.host, port=node.port, password=node.password)
        counts.append(len(await client.keys(b"task:*")))
        await client.aclose()
    return counts


async def test_writes_spread_over_the_cluster_and_keep_the_newest_version(redis_cluster):
    writers = [LineageStore(open_store(redis_cluster.url), writer) for writer in range(3)]
    store = writers[0]
    assert isinstance(store.store, ClusterStore)
    try:
        specs = [spec(i) for i in range(300)]
        for writer, part in zip(writers, (specs[:100], specs[100:200], specs[200:]), strict=True):
            assert sorted(await writer.write(whole(part))) == sorted((s.task_id, 0) for s in part)
        assert await store.read([s.task_id for s in specs]) == {s.task_id: s for s in specs}
        # Three writers, three nodes: each writer's group lives on a node of its own.
        assert sorted(await _keys_per_node(redis_cluster)) == [100, 100, 100]

        first = spec(0).task_id
        assert await store.write(whole([spec(0, version=2, method="newer")])) == [(first, 2)]
        assert await store.write(whole([spec(0, version=1, method="stale")])) == [(first, 2)]
        assert (await store.read([first]))[first].method == "newer"
        # Recovery's lookups work across slots too.
        assert set(await store.sent_to(b"r")) == {s.task_id for s in specs}
        await store.register_actor(1, b"actor")
        assert await store.actors_on(1) == [b"actor"]
    finally:
        for writer in writers:
            await writer.aclose()


def test_a_cluster_logs_its_lineage_to_a_redis_cluster(redis_cluster_url, cluster_with):
    with cluster_with(num_nodes=2, store_url=redis_cluster_url, ft="lineage_stash"):
        @actorrt.remote
        class Counter:
            def __init__(self):
                self.n = 0

            def add(self):
                self.n += 1
                return context.current_task_id()

        counter = Counter.options(node=1).remote()
        task_ids = actorrt.get([counter.add.remote() for _ in range(50)], timeout=30)
        stats = actorrt.stats()
        assert stats["store_url"].startswith("redis+cluster://") and "pw@" not in stats["store_url"]
        assert stats["store_shards"] == []
        worker = context.current().worker

        async def stored():
            store = LineageStore(open_store(redis_cluster_url))
            try:
                for _ in range(100):
                    held = await store.read(task_ids)
                    if len(held) == len(task_ids):
                        return held
                    await asyncio.sleep(0.05)
                return held
            finally:
                await store.aclose()

        held = context.current().call(stored())
        assert set(held) == set(task_ids)
        assert {held[t].method for t in task_ids} == {"add"}
        assert worker.ft.stats().committed > 0


@pytest.fixture
def redis_cluster_url(tmp_path):
    """A Redis Cluster for a synchronous test (started on a loop of its own)."""
    loop = asyncio.new_event_loop()
    cluster = loop.run_until_complete(RedisCluster.start(tmp_path / "cluster", "pw", size=3))
    try:
        yield cluster.url
    finally:
        loop.run_until_complete(cluster.stop())
        loop.close()


def test_a_bad_store_url_is_refused_before_anything_starts():
    with pytest.raises(ValueError, match="scheme must be"):
        actorrt.init(store_url="http://127.0.0.1:6379")
    with pytest.raises(ValueError, match="is not host:port"):
        actorrt.init(store_url="redis+cluster://localhost")
