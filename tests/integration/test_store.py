"""The lineage store against real redis-server shards: sharding, versions, acks, errors."""

import asyncio

import pytest
import redis.asyncio as aioredis
import redis.exceptions
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from actorrt.cluster.node_recovery import NodeRecoveries
from actorrt.exceptions import ClusterError, StaleIncarnationError
from actorrt.lineage import ids
from actorrt.lineage.flusher import Flusher
from actorrt.rpc import common_pb2 as pb
from actorrt.store.clients import ShardedStore, StoreRefusedError, until_reachable
from actorrt.store.lineage_store import TOMBSTONE_VERSION, LineageStore, record_key
from actorrt.store.redis_server import RedisShard, _free_port
from actorrt.util.lease import Lease


def whole(specs):
    """Writes of ``specs`` whole (not as the delta of their version)."""
    return [(s, True) for s in specs]


@pytest.fixture
async def shards(tmp_path):
    started = [await RedisShard.start(tmp_path / f"s{i}", "pw") for i in range(3)]
    try:
        yield started
    finally:
        for shard in started:
            await shard.stop()


@pytest.fixture
async def store(shards):
    lineage = LineageStore(ShardedStore([s.address for s in shards], "pw"))
    try:
        yield lineage
    finally:
        await lineage.aclose()


def spec(i: int, version: int = 0, method: str = "m") -> pb.TaskSpec:
    return pb.TaskSpec(task_id=ids.task_id(b"r", b"s", i), version=version, method=method)


async def test_each_writer_writes_into_its_own_group_and_writers_spread_over_the_shards(shards):
    stores = [LineageStore(ShardedStore([s.address for s in shards], "pw"), writer) for writer in range(3)]
    clients = [aioredis.Redis(host=s.host, port=s.port, password="pw") for s in shards]  # the test's own
    try:
        written = {}
        for writer, store in enumerate(stores):
            specs = [pb.TaskSpec(task_id=ids.task_id(b"r", b"s%d" % writer, i), receiver=b"r", method="m")
                     for i in range(100)]
            assert sorted(await store.write(whole(specs))) == sorted((s.task_id, 0) for s in specs)
            written.update({s.task_id: s for s in specs})
        # Three writers, three shards: one writer's 100 records (and its index) on each.
        assert sorted([len(await c.keys(b"task:*")) for c in clients]) == [100, 100, 100]
        for store in stores:  # any process reads what every other wrote
            assert await store.read(list(written)) == written
            assert await store.sent_to(b"r") == written
    finally:
        for c in clients:
            await c.aclose()
        for store in stores:
            await store.aclose()


async def test_a_task_written_by_several_processes_reads_at_its_newest_version_and_is_collected_whole(shards):
    sender, receiver = (LineageStore(ShardedStore([s.address for s in shards], "pw"), w) for w in (0, 1))
    try:
        task = pb.TaskSpec(task_id=ids.task_id(b"r", b"s", 1), receiver=b"r", method="m",
                           dependencies=[b"parent", b""])
        ran = pb.TaskSpec()
        ran.CopyFrom(task)
        ran.version, ran.predecessor_id, ran.dependencies[1] = 1, b"before", b"before"
        assert await sender.write(whole([task])) == [(task.task_id, 0)]
        # The receiver writes its copy whole, then the order it ran in as a delta.
        assert await receiver.write(whole([task])) == [(task.task_id, 0)]
        assert await receiver.write([(ran, False)]) == [(task.task_id, 1)]
        assert await sender.read([task.task_id]) == {task.task_id: ran}
        assert await sender.sent_to(b"r") == {task.task_id: ran}
        await sender.forget(b"r", [task.task_id])
        assert await receiver.sent_to(b"r") == {}
        assert await receiver.read([task.task_id]) == {}
        # Late writes of either copy are acked as committed and resurrect nothing.
        assert await sender.write(whole([task])) == [(task.task_id, TOMBSTONE_VERSION)]
        assert await receiver.write([(ran, False)]) == [(task.task_id, TOMBSTONE_VERSION)]
        assert await receiver.sent_to(b"r") == {}
    finally:
        await sender.aclose()
        await receiver.aclose()


async def test_collected_records_leave_the_index_and_late_writes_are_acked_not_resurrected(store):
    receiver = ids.actor_id(b"creator", 1)
    specs = [pb.TaskSpec(task_id=ids.task_id(receiver, b"s", i), receiver=receiver, version=i % 2, task_counter=i)
             for i in range(1, 41)]
    await store.write(whole(specs))
    assert set(await store.sent_to(receiver)) == {s.task_id for s in specs}
    await store.forget(receiver, [s.task_id for s in specs[:30]])
    assert set(await store.sent_to(receiver)) == {s.task_id for s in specs[30:]}
    # A flusher that was slow writes a collected task again: it learns it is committed (for good),
    # and the store does not take the record or its index entry back.
    acks = dict(await store.write(whole(specs[:30])))
    assert all(acks[s.task_id] == TOMBSTONE_VERSION for s in specs[:30])
    assert await store.read([s.task_id for s in specs[:30]]) == {}
    assert set(await store.sent_to(receiver)) == {s.task_id for s in specs[30:]}


async def test_a_task_collected_before_its_first_write_lands_is_not_brought_back_by_it(store):
    """A checkpoint can cover a task whose write still waits behind the group commit: the
    collection leaves a tombstone for it all the same, and the late write lands on it."""
    receiver = ids.actor_id(b"creator", 1)
    specs = [pb.TaskSpec(task_id=ids.task_id(receiver, b"s", i), receiver=receiver, task_counter=i)
             for i in range(1, 11)]
    await store.write(whole(specs[:5]))  # the receiver's index is there; tasks 6-10 are not written yet
    await store.forget(receiver, [s.task_id for s in specs])
    acks = dict(await store.write(whole(specs[5:])))
    assert all(acks[s.task_id] == TOMBSTONE_VERSION for s in specs[5:])
    assert not await store.sent_to(receiver) and await store.read([s.task_id for s in specs]) == {}


async def test_the_store_keeps_the_newest_version_and_acks_what_it_holds(store):
    await store.write(whole([spec(1, version=1, method="reordered")]))
    # An older version is rejected: the ack names the version held, so the writer learns it lost.
    assert await store.write(whole([spec(1, version=0, method="stale")])) == [(spec(1).task_id, 1)]
    assert (await store.read([spec(1).task_id]))[spec(1).task_id].method == "reordered"
    # The same version again is a no-op ack; a newer one replaces.
    assert await store.write(whole([spec(1, version=1, method="again")])) == [(spec(1).task_id, 1)]
    assert await store.write(whole([spec(1, version=2, method="newer")])) == [(spec(1).task_id, 2)]
    assert (await store.read([spec(1).task_id]))[spec(1).task_id].method == "newer"
    # Two versions of one task in one batch: the newer is written.
    acks = await store.write(whole([spec(2, version=3), spec(2, version=1)]))
    assert acks == [(spec(2).task_id, 3)]


async def test_wrong_password_is_refused(shards):
    store = LineageStore(ShardedStore([shards[0].address], "not-the-password"))
    try:
        with pytest.raises(ClusterError, match="refused the password"):
            await store.write(whole([spec(1)]))
    finally:
        await store.aclose()


async def test_unreachable_store_is_a_clear_error(shards):
    address = shards[0].address
    await shards[0].stop()
    store = LineageStore(ShardedStore([address], "pw"))
    try:
        with pytest.raises(ClusterError, match="unreachable"):
            await store.write(whole([spec(1)]))
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


async def test_a_receiver_finds_every_task_sent_to_it_and_a_slot_its_actors(store):
    to_a = [pb.TaskSpec(task_id=ids.task_id(b"a", b"s", i), receiver=b"a", method="m") for i in range(1, 80)]
    to_b = [pb.TaskSpec(task_id=ids.task_id(b"b", b"s", i), receiver=b"b", method="m") for i in range(1, 5)]
    await store.write(whole(to_a + to_b))
    reordered = pb.TaskSpec()
    reordered.CopyFrom(to_a[0])
    reordered.version, reordered.predecessor_id = 1, to_a[5].task_id
    await store.write(whole([reordered]))
    found = await store.sent_to(b"a")
    assert set(found) == {s.task_id for s in to_a}
    assert found[reordered.task_id].predecessor_id == to_a[5].task_id  # the newest version
    assert set(await store.sent_to(b"b")) == {s.task_id for s in to_b}
    assert await store.sent_to(b"nobody") == {}

    await store.register_actor(3, b"actor-1")
    await store.register_actor(3, b"actor-2")
    await store.register_actor(3, b"actor-1")
    await store.register_actor(4, b"actor-3")
    assert await store.actors_on(3) == [b"actor-1", b"actor-2"]
    assert await store.actors_on(5) == []


async def test_a_new_version_is_written_as_a_delta_beside_the_one_whole_spec_in_either_order(store, shards):
    big = pb.TaskSpec(task_id=ids.task_id(b"a", b"s", 1), receiver=b"a", method="m", version=0,
                      dependencies=[b"parent", ids.task_id(b"a", b"s", 0)],
                      args=[pb.Arg(value=pb.SerializedObject(data=b"x" * 100_000))])
    v1 = pb.TaskSpec()
    v1.CopyFrom(big)
    v1.version, v1.predecessor_id, v1.dependencies[1] = 1, b"ran-before", b"ran-before"
    v2 = pb.TaskSpec()
    v2.CopyFrom(v1)
    v2.version = 2
    v2.application_log.append(b"a clock reading")

    # A version can reach the store before the spec: nothing to replay yet, and nothing committed.
    assert await store.write([(v1, False)]) == [(big.task_id, -1)]
    assert await store.read([big.task_id]) == {}
    assert await store.write([(big, True)]) == [(big.task_id, 1)]  # acked as held: the body is kept
    assert (await store.read([big.task_id]))[big.task_id] == v1
    assert await store.write([(v2, False)]) == [(big.task_id, 2)]
    assert (await store.read([big.task_id]))[big.task_id] == v2

    record = {}
    for shard in shards:  # the test's own clients: the record, as the shard holds it
        client = aioredis.Redis(host=shard.host, port=shard.port, password="pw")
        record = record or await client.hgetall(record_key(store.group, big.task_id))
        await client.aclose()
    assert len(record[b"s"]) > 100_000 > 20 * len(record[b"d"])  # one whole spec; the delta is small

    await store.forget(b"a", [big.task_id])
    assert await store.write([(big, True)]) == [(big.task_id, TOMBSTONE_VERSION)]  # not resurrected
    assert await store.read([big.task_id]) == {}


async def test_a_fenced_incarnation_can_write_neither_lineage_nor_checkpoint_pointers(shards):
    def node_store(slot: int, epoch: int, lease: Lease | None = None) -> LineageStore:
        return LineageStore(ShardedStore([s.address for s in shards], "pw"), slot, epoch, lease)

    old_lease = Lease()
    old, new, heir, driver = node_store(3, 1, old_lease), node_store(3, 2), node_store(5, 1), node_store(77, 0)
    try:
        await old.write(whole([spec(1)]))
        await old.set_checkpoint(b"actor", 4, "/ckpt/4")
        await new.fence(3, 2)  # epoch 2 takes slot 3 over before it reads
        with pytest.raises(StaleIncarnationError, match="epoch 1 of this node slot was replaced by epoch 2"):
            await old.write(whole([spec(2)]))
        assert old_lease.revoked and not old_lease.valid()  # and it acts no more
        with pytest.raises(StaleIncarnationError):
            await node_store(3, 1).set_checkpoint(b"actor", 5, "/ckpt/stale")
        assert await new.read([spec(1).task_id, spec(2).task_id]) == {spec(1).task_id: spec(1)}
        assert await new.checkpoint_of(b"actor") == (4, "/ckpt/4", 4)
        # The new incarnation, other slots and drivers write on; an heir's pointer is found too.
        assert await new.write(whole([spec(3)])) == [(spec(3).task_id, 0)]
        assert await driver.write(whole([spec(4)])) == [(spec(4).task_id, 0)]
        await heir.set_checkpoint(b"actor", 6, "/ckpt/6")
        assert await new.checkpoint_of(b"actor") == (6, "/ckpt/6", 6)
        await heir.set_checkpoint(b"actor", 7, "/ckpt/7", announced=6)  # 7 goes to a standby first
        assert await new.checkpoint_of(b"actor") == (7, "/ckpt/7", 6)  # a replay may start from 6
        await heir.set_announced(b"actor", 7)  # now everyone hears of 7
        assert await new.checkpoint_of(b"actor") == (7, "/ckpt/7", 7)
        await new.fence(3, 1)  # a fence never moves back
        with pytest.raises(StaleIncarnationError):
            await node_store(3, 1).write(whole([spec(5)]))
    finally:
        for store in (old, new, heir, driver):
            await store.aclose()


async def test_a_write_the_store_refuses_for_good_is_left_out_and_the_flusher_goes_on(shards):
    for shard in shards:  # the smallest bulk limit Redis allows: a 2 MiB spec is over it
        client = aioredis.Redis(host=shard.host, port=shard.port, password="pw")
        await client.config_set("proto-max-bulk-len", "1mb")
        await client.aclose()
    acked: list[tuple[bytes, int]] = []
    store = LineageStore(ShardedStore([s.address for s in shards], "pw"), 1, 1)
    flusher = Flusher(store, acked.extend)
    try:
        big = pb.TaskSpec(task_id=ids.task_id(b"r", b"s", 99), method="m", args=[pb.Arg(value=pb.SerializedObject(
            data=b"x" * (2 << 20)))])
        writes = [*whole([spec(i) for i in range(10)]), (big, True), *whole([spec(i) for i in range(10, 20)])]
        acks = await asyncio.wait_for(flusher.write_now([s for s, _ in writes]), 30)
        assert sorted(acks) == sorted((spec(i).task_id, 0) for i in range(20))
        assert flusher.refused == 1
        assert await store.read([spec(25).task_id]) == {}
        assert await flusher.write_now([spec(25)]) == [(spec(25).task_id, 0)]  # and later writes go in
    finally:
        await store.aclose()


async def test_a_recovery_read_waits_for_a_store_that_is_not_up_yet(tmp_path):
    """A replay plan read from an unreachable store raises (it is not "cannot be rebuilt"), and
    ``until_reachable`` retries it until a shard comes up on that address."""
    port = _free_port("127.0.0.1")
    store = LineageStore(ShardedStore([f"127.0.0.1:{port}"], "pw", retries=0))
    shard = None
    try:
        with pytest.raises(ClusterError, match="unreachable"):
            await NodeRecoveries._replay_plan(store, b"actor")

        async def start_later():
            nonlocal shard
            await asyncio.sleep(1.0)
            shard = await RedisShard.start(tmp_path / "late", "pw", port=port)

        starting = asyncio.ensure_future(start_later())
        plan = await asyncio.wait_for(until_reachable("a read", NodeRecoveries._replay_plan, store, b"actor"), 30)
        await starting
        assert "no constructor" in plan  # the store answered: it holds nothing for this actor
    finally:
        await store.aclose()
        if shard is not None:
            await shard.stop()


async def test_a_full_store_is_a_passing_condition_not_a_refusal(shards):
    """Redis out of memory answers writes with OOM, wrapped in the script's error: the writer
    retries it like an unreachable store (``ClusterError``), and does not drop the write."""
    clients = [aioredis.Redis(host=s.host, port=s.port, password="pw") for s in shards]
    store = LineageStore(ShardedStore([s.address for s in shards], "pw"), 1, 1)
    try:
        for client in clients:
            await client.config_set("maxmemory-policy", "noeviction")
            await client.config_set("maxmemory", "1")
        with pytest.raises(ClusterError, match="OOM") as raised:
            await store.write(whole([spec(1)]))
        assert not isinstance(raised.value, StoreRefusedError)
        for client in clients:
            await client.config_set("maxmemory", "0")
        assert await store.write(whole([spec(1)])) == [(spec(1).task_id, 0)]
    finally:
        await store.aclose()
        for client in clients:
            await client.aclose()
