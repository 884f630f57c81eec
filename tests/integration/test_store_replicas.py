"""Store shards with replicas, against real redis-server processes killed with real signals.

A write is acked only once the shard's replica holds it (``WAIT``): while the replica is stopped
writes are not acked, and a replica promoted after its shard is SIGKILLed at a random moment under
a stream of writes holds every write that was acked. An embedded cluster whose shard is gone for
good (SIGKILLed, its directory deleted) goes on through the promoted replica, gets a new replica,
and rebuilds a killed node's actor from the lineage the lost shard had acked, exactly once; also
when the shard is lost while the head is down. An external Redis Cluster's own failover loses no
acked write either."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
from pathlib import Path

import pytest

import actorrt
from actorrt.cluster import session
from actorrt.exceptions import ClusterError
from actorrt.lineage import ids
from actorrt.rpc import common_pb2 as pb
from actorrt.store.clients import ShardedStore
from actorrt.store.lineage_store import LineageStore
from actorrt.store.opening import open_store
from actorrt.store.redis_server import RedisShard
from actorrt.testing import Counter, cluster_session, head_down
from tests.support.redis_cluster import RedisCluster
from tests.support.waiting import eventually


@pytest.fixture
async def primary_and_replica(tmp_path):
    primary = await RedisShard.start(tmp_path / "primary", "pw")
    replica = await RedisShard.start(tmp_path / "replica", "pw", replica_of=primary)
    try:
        async with asyncio.timeout(20):
            while not await replica.in_sync():
                await asyncio.sleep(0.05)
        yield primary, replica
    finally:
        await asyncio.gather(primary.stop(), replica.stop())


def _specs(start: int, n: int) -> list[pb.TaskSpec]:
    return [pb.TaskSpec(task_id=ids.task_id(b"r", b"s", i), receiver=b"r", method="m") for i in range(start, start + n)]


async def test_a_write_is_acked_only_once_the_replica_holds_it(primary_and_replica):
    primary, replica = primary_and_replica
    store = LineageStore(ShardedStore([primary.address], "pw", replicas=1))
    on_replica = LineageStore(ShardedStore([replica.address], "pw"))
    try:
        first = _specs(0, 20)
        await store.write([(s, True) for s in first])
        assert len(await on_replica.read([s.task_id for s in first])) == 20  # acked: the replica has it

        os.kill(replica.process.pid, signal.SIGSTOP)
        try:
            with pytest.raises(ClusterError, match="NOREPLICAS"):
                await store.write([(s, True) for s in _specs(20, 5)])
        finally:
            os.kill(replica.process.pid, signal.SIGCONT)
        await store.write([(s, True) for s in _specs(20, 5)])  # the replica is back: acked
        assert len(await on_replica.read([s.task_id for s in _specs(0, 25)])) == 25
    finally:
        await store.aclose()
        await on_replica.aclose()


@pytest.mark.parametrize("seed", [1])
async def test_a_promoted_replica_holds_every_acked_write(primary_and_replica, seed):
    primary, replica = primary_and_replica
    store = LineageStore(ShardedStore([primary.address], "pw", replicas=1))
    acked: list[bytes] = []

    async def write_until_it_fails() -> None:
        n = 0
        while True:
            batch = _specs(n, 10)
            try:
                await store.write([(s, True) for s in batch])
            except ClusterError:
                return  # the shard is gone: what was not acked may be lost
            acked.extend(s.task_id for s in batch)
            n += 10

    writing = asyncio.create_task(write_until_it_fails())
    await asyncio.sleep(random.Random(seed).uniform(0.2, 0.6))
    os.kill(primary.process.pid, signal.SIGKILL)
    shutil.rmtree(primary.directory)  # its host is gone for good
    await asyncio.wait_for(writing, 30)
    await store.aclose()
    await replica.replicate(None)
    promoted = LineageStore(ShardedStore([replica.address], "pw"))  # (it has no replica of its own yet)
    try:
        assert len(acked) >= 10
        held = await promoted.read(acked)
        assert sorted(held) == sorted(acked)
        await promoted.write([(s, True) for s in _specs(10**6, 3)])  # it takes writes now
    finally:
        await promoted.aclose()


async def test_a_redis_cluster_fails_over_and_keeps_every_acked_write(tmp_path):
    """An external Redis Cluster with a replica per primary: a primary SIGKILLed under a stream of
    writes is replaced by its replica (the cluster's own failover), the store follows the slots to
    it, and every write acked before, during and after is there."""
    cluster = await RedisCluster.start(tmp_path / "cluster", "pw", size=3, replicas=4)
    store = LineageStore(open_store(cluster.url, replicas=1))
    acked: list[bytes] = []
    failed = 0

    async def write(n: int) -> None:
        nonlocal failed
        batch = _specs(n, 10)
        while True:
            try:
                await store.write([(s, True) for s in batch])
            except ClusterError:
                failed += 1  # the primary is down, or no replica has acked yet: retried
                await asyncio.sleep(0.1)
                continue
            acked.extend(s.task_id for s in batch)
            return

    try:
        await write(0)
        group_node = store.store._client.get_node_from_key(b"{%02x}" % store.group)
        victim = next(n for n in cluster.nodes if n.address == group_node.name)
        writing = asyncio.create_task(asyncio.wait_for(_write_many(write, 10, 400), 60))
        await asyncio.sleep(0.5)
        os.kill(victim.process.pid, signal.SIGKILL)
        try:
            await writing
        except TimeoutError:
            pytest.fail(f"the writes did not go on after {victim.address} was killed; "
                        f"the survivors' views:\n{await cluster.views(victim)}")
        assert failed > 0  # the writes did meet the failover
        held = await store.read(acked)
        assert sorted(held) == sorted(acked) and len(acked) == 400
    finally:
        await store.aclose()
        await cluster.stop()


async def _write_many(write, start: int, stop: int) -> None:
    for n in range(start, stop, 10):
        await write(n)
        await asyncio.sleep(0.02)


def _store_shards() -> list[dict]:
    return actorrt.stats()["store_shards"]


def test_an_embedded_cluster_fails_over_to_a_replica_of_a_shard_gone_for_good():
    actorrt.init(num_nodes=2, store_shards=2, store_replicas=1)
    try:
        eventually(_store_shards, lambda shards: all(len(s["replicas"]) == 1 for s in shards),
                   what="each shard has its replica")
        counter = Counter.options(node=1).remote()
        assert actorrt.get([counter.inc.remote() for _ in range(200)], timeout=60)[-1] == 200

        lost = _store_shards()[0]
        os.kill(lost["pid"], signal.SIGKILL)
        shutil.rmtree(Path(cluster_session().session_dir) / session.STORE_DIR.format(0))  # its disk is gone too
        assert actorrt.get([counter.inc.remote() for _ in range(100)], timeout=60)[-1] == 300  # calls go on

        now = eventually(lambda: _store_shards()[0], lambda s: s["failovers"] == 1 and len(s["replicas"]) == 1,
                         what="the replica promoted and a new one started")
        assert now["address"] == lost["replicas"][0] and now["replicas"] != lost["replicas"]

        actorrt.kill_node(1)  # rebuilt from lineage, part of which only the promoted replica holds
        assert actorrt.get(counter.inc.remote(), timeout=60) == 301
        Counter.options(name="after-failover").remote()  # the head's state is in the store too
        assert actorrt.get(actorrt.get_actor("after-failover").inc.remote(), timeout=30) == 1
    finally:
        actorrt.shutdown()


def test_a_shard_lost_while_the_head_is_down_fails_over_once_it_is_back():
    actorrt.init(num_nodes=1, store_shards=1, store_replicas=1)
    try:
        eventually(_store_shards, lambda shards: len(shards[0]["replicas"]) == 1, what="the shard has its replica")
        counter = Counter.options(node=0).remote()
        assert actorrt.get([counter.inc.remote() for _ in range(100)], timeout=60)[-1] == 100
        lost = _store_shards()[0]
        with head_down() as down:
            os.kill(lost["pid"], signal.SIGKILL)
            shutil.rmtree(Path(down.session_dir) / session.STORE_DIR.format(0))
            assert actorrt.get([counter.inc.remote() for _ in range(50)], timeout=60)[-1] == 150  # calls go on
        now = eventually(lambda: _store_shards()[0], lambda s: s["failovers"] == 1 and len(s["replicas"]) == 1,
                         what="the restarted head to promote the replica and start a new one")
        assert now["address"] == lost["replicas"][0]
        actorrt.kill_node(0)
        assert actorrt.get(counter.inc.remote(), timeout=60) == 151
    finally:
        actorrt.shutdown()


def test_store_replicas_on_an_external_store_without_them_is_a_clear_error(external_store):
    with pytest.raises(actorrt.ClusterError, match="fewer replicas connected"):
        actorrt.init(num_nodes=1, store_url=external_store, store_replicas=1, timeout=30)


async def test_a_redis_cluster_counts_its_replicas(tmp_path):
    cluster = await RedisCluster.start(tmp_path / "cluster", "pw", size=3, replicas=3)
    store = open_store(cluster.url, replicas=1)
    try:
        assert sorted((await store.replicas_connected()).values()) == [1, 1, 1]
    finally:
        await store.aclose()
        await cluster.stop()
