"""The head's state in a real redis-server: read back by a restarted head, and never written by a
head that another has replaced since."""

from __future__ import annotations

import pytest

from actorrt.cluster.head_state import HeadState, SupersededError
from actorrt.exceptions import ClusterError
from actorrt.rpc import head_pb2
from actorrt.store.clients import ShardedStore
from actorrt.store.redis_server import RedisShard


@pytest.fixture
async def store(tmp_path):
    shard = await RedisShard.start(tmp_path / "s", "pw")
    store = ShardedStore([shard.address], "pw")
    try:
        yield store, shard
    finally:
        await store.aclose()
        await shard.stop()


async def test_a_restarted_head_reads_back_the_view_and_names_and_counts_its_incarnation(store):
    store, _ = store
    first = HeadState(store)
    assert await first.create(b"cluster1") == 1
    view = head_pb2.ClusterView(nodes=[head_pb2.NodeInfo(slot=0, epoch=3, state=head_pb2.ALIVE, pid=42)])
    await first.save_view(view)
    await first.name_taken(head_pb2.NamedActor(name="a", actor_id=b"A"))
    await first.name_taken(head_pb2.NamedActor(name="b", actor_id=b"B"))
    await first.names_freed(b"B", ["b"])
    restored = await HeadState(store).resume()
    assert (restored.cluster_id, restored.incarnation, restored.view) == (b"cluster1", 2, view)
    assert list(restored.names) == ["a"] and restored.names["a"].actor_id == b"A"
    assert restored.killed == {b"B"}


async def test_a_replaced_head_writes_nothing_and_learns_it(store):
    store, _ = store
    old = HeadState(store)
    await old.create(b"cluster1")
    await old.save_view(head_pb2.ClusterView(revision=1))
    new = HeadState(store)
    await new.resume()
    for write in (old.save_view(head_pb2.ClusterView(revision=99)),
                  old.name_taken(head_pb2.NamedActor(name="x", actor_id=b"X")), old.names_freed(b"X", ["x"])):
        with pytest.raises(SupersededError):
            await write
    restored = await HeadState(store).resume()
    assert restored.view.revision == 1 and not restored.names and not restored.killed


async def test_nothing_to_restart_from_is_a_clear_error(store):
    store, _ = store
    with pytest.raises(ClusterError, match="holds no cluster's state"):
        await HeadState(store).resume()


async def test_a_shard_left_by_a_dead_head_is_found_by_its_address(store, tmp_path):
    _, shard = store
    found = await RedisShard.running(shard.host, shard.port, "pw", shard.directory)
    assert found is not None and found.process.pid == shard.process.pid and found.process.alive()
    assert await RedisShard.running(shard.host, shard.port, "wrong", shard.directory) is None
