"""A lineage store reached as a Redis ACL user (``redis://user:password@host:port``), with
permissions short of everything: the cluster runs and recovers through it; a wrong password is a
clear error at start."""

from __future__ import annotations

import pytest
import redis

import actorrt
from actorrt.store.redis_server import RedisShard
from actorrt.testing import Counter


@pytest.fixture
async def acl_store(tmp_path):
    """A redis-server whose default user needs an admin password, with a user ``actorrt`` that may
    run no administrative ("dangerous") command."""
    shard = await RedisShard.start(tmp_path / "acl", "admin-password")
    admin = redis.Redis(host=shard.host, port=shard.port, password="admin-password")
    admin.acl_setuser("actorrt", enabled=True, passwords=["+actorrt-password"], keys=["*"],
                      commands=["+@all", "-@dangerous"])
    admin.close()
    try:
        yield shard.address
    finally:
        await shard.stop()


def test_a_cluster_runs_and_recovers_through_a_store_acl_user(acl_store):
    actorrt.init(num_nodes=2, store_url=f"redis://actorrt:actorrt-password@{acl_store}")
    try:
        counter = Counter.options(node=1, name="counted").remote()
        assert actorrt.get([counter.inc.remote() for _ in range(50)], timeout=30)[-1] == 50
        actorrt.kill_node(1)
        assert actorrt.get(counter.inc.remote(), timeout=60) == 51  # rebuilt from the lineage it logged
        assert actorrt.stats()["nodes"][1]["recoveries"]
    finally:
        actorrt.shutdown()


def test_a_wrong_store_password_stops_the_start_with_a_clear_error(acl_store):
    with pytest.raises(actorrt.ClusterError, match="refused the password"):
        actorrt.init(num_nodes=1, store_url=f"redis://actorrt:wrong@{acl_store}", timeout=30)
