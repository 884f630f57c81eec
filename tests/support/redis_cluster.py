"""A local Redis Cluster for the lineage store: N redis-server nodes, the 16384 slots split evenly.

For trying the store's Redis Cluster mode (``redis+cluster://`` URLs) on one machine; a production
cluster is set up by its operators and only its URL is given to actorrt.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import redis.asyncio as aioredis

from actorrt.exceptions import ClusterError
from actorrt.store.opening import CLUSTER_SCHEME
from actorrt.store.redis_server import RedisShard
from actorrt.store.tls import StoreTls

SLOTS = 16384


@dataclass
class RedisCluster:
    nodes: list[RedisShard]  # primaries first, then their replicas
    primaries: int

    @property
    def url(self) -> str:
        password = self.nodes[0].password
        scheme = CLUSTER_SCHEME.replace("redis", "rediss") if self.nodes[0].tls else CLUSTER_SCHEME
        return f"{scheme}://:{password}@" + ",".join(n.address for n in self.nodes)

    @classmethod
    async def start(cls, directory: Path, password: str, size: int = 3, host: str = "127.0.0.1",
                    timeout: float = 20.0, tls: StoreTls | None = None, replicas: int = 0) -> RedisCluster:
        """``size`` primaries and ``replicas`` replicas, dealt out among them in turn. The cluster
        promotes a replica in the place of a primary that fails, and moves a spare replica (of a
        primary with two) to a primary left without one. With ``tls``, its nodes serve TLS only, and speak it among
        themselves."""
        nodes = list(await asyncio.gather(*(
            RedisShard.start(directory / f"node-{i}", password, host, cluster=True, tls=tls)
            for i in range(size + replicas)
        )))
        cluster = cls(nodes, size)
        try:
            await cluster._form(timeout)
        except BaseException:
            await cluster.stop()
            raise
        return cluster

    async def _form(self, timeout: float) -> None:
        clients = [n.client() for n in self.nodes]
        try:
            size, primaries = len(clients), self.primaries
            # Distinct config epochs from the start, as redis-cli's cluster create sets them: left to
            # the cluster, equal epochs are told apart by bumping one of them while the cluster runs,
            # and a replica that still holds its primary's old epoch when the primary dies never
            # gets the votes to replace it (the others have seen a newer epoch for its slots).
            for epoch, client in enumerate(clients, 1):
                await client.execute_command("CLUSTER SET-CONFIG-EPOCH", epoch)
            for i, client in enumerate(clients[:primaries]):
                await client.execute_command("CLUSTER ADDSLOTS",
                                             *range(i * SLOTS // primaries, (i + 1) * SLOTS // primaries))
            for node in self.nodes[1:]:
                await clients[0].execute_command("CLUSTER MEET", node.host, node.port)
            async with asyncio.timeout(timeout):
                while not all(await asyncio.gather(*(self._ready(c, size) for c in clients))):
                    await asyncio.sleep(0.1)
                ids = [await c.execute_command("CLUSTER MYID") for c in clients[:primaries]]
                for i, client in enumerate(clients[primaries:]):
                    await client.execute_command("CLUSTER REPLICATE", ids[i % primaries])
                while not all([await self._in_sync(c) for c in clients[primaries:]]):
                    await asyncio.sleep(0.1)
                while len({await self._view(c) for c in clients}) > 1:  # until every node sees the same roles
                    await asyncio.sleep(0.1)
        except TimeoutError:
            raise ClusterError(f"the Redis Cluster of {len(self.nodes)} nodes did not form") from None
        finally:
            for client in clients:
                await client.aclose()

    @staticmethod
    async def _ready(client: aioredis.Redis, size: int) -> bool:
        info = await client.execute_command("CLUSTER INFO")  # redis-py parses it into a dict
        return info.get("cluster_state") == "ok" and int(info.get("cluster_known_nodes", 0)) == size

    @staticmethod
    async def _view(client: aioredis.Redis) -> frozenset:
        """Who serves which slots and whom each replica follows, at which epoch, as this node sees it."""
        nodes = await client.execute_command("CLUSTER NODES")  # redis-py parses it by address
        return frozenset((address, "master" in n["flags"], n["master_id"], n["epoch"], str(n["slots"]))
                         for address, n in nodes.items())

    @staticmethod
    async def _in_sync(client: aioredis.Redis) -> bool:
        return (await client.info("replication")).get("master_link_status") == "up"

    async def views(self, skip: RedisShard) -> str:
        """Each other node's ``CLUSTER NODES`` and the end of its log: what a test that waited on
        the cluster in vain shows."""
        parts = []
        for node in self.nodes:
            if node is skip:
                continue
            client = node.client(socket_timeout=2.0)
            try:
                view = await client.execute_command("CLUSTER NODES")  # redis-py parses it by address
                nodes = "\n".join(f"  {address} {n['flags']} of {n['master_id'][:8]} slots {n['slots']}"
                                  for address, n in view.items())
            except Exception as exc:  # noqa: BLE001 - a report: whatever the node answered
                nodes = repr(exc)
            finally:
                await client.aclose()
            log = node.directory / "redis.log"
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:]) if log.exists() else "no log"
            parts.append(f"--- {node.address}\n{nodes}\n{tail}")
        return "\n".join(parts)

    async def stop(self) -> None:
        await asyncio.gather(*(n.stop() for n in self.nodes))
