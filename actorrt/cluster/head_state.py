"""The head's state in the lineage store, from which a restarted head rebuilds its view.

What the head decides is written here before anyone can act on it: a slot's new epoch before its
process starts, a node's registration before its reply, a failure before the view that announces
it, a name before anyone learns who has it. A restarted head reads it back, and the nodes it
names are the truth for what runs: it adopts those that still run and restarts the others. Every
write checks the head's incarnation: a head that another has replaced (a write of a killed head
still on its way) changes nothing, and learns so (``SupersededError``).

Keys (one hash tag: one shard, or one Redis Cluster slot):
- ``{actorrt:head}:cluster``, a hash: the cluster's ``id``, the head's ``incarnation`` (one more at
  every start: views are numbered after it, so a restarted head's views are newer than any of its
  predecessor's), and the last ``view`` (nodes and their epochs, drivers that left, rollbacks);
- ``{actorrt:head}:names``: name to ``NamedActor``; ``{actorrt:head}:killed``: actors that take no
  name again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from redis.exceptions import ResponseError

from actorrt.cluster.store_lease import DEAD_EPOCHS
from actorrt.exceptions import ClusterError
from actorrt.rpc import head_pb2
from actorrt.store.clients import Client, Store, refusal, script_call, until_reachable

_CLUSTER = b"{actorrt:head}:cluster"
_NAMES = b"{actorrt:head}:names"
_KILLED = b"{actorrt:head}:killed"

# Each script's KEYS: the cluster hash, names, killed; ARGV[1]: the writing head's incarnation.
# They return 0, writing nothing, if a later head has started.
_SAVE_VIEW = """
if redis.call('HGET', KEYS[1], 'incarnation') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'view', ARGV[2])
return 1
"""
_TAKE_NAME = """
if redis.call('HGET', KEYS[1], 'incarnation') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return 1
"""
_FREE_NAMES = """
if redis.call('HGET', KEYS[1], 'incarnation') ~= ARGV[1] then return 0 end
redis.call('SADD', KEYS[3], ARGV[2])
for i = 3, #ARGV do redis.call('HDEL', KEYS[2], ARGV[i]) end
return 1
"""


class SupersededError(ClusterError):
    """Another head has started on this cluster's state since this one did."""


@dataclass
class Restored:
    """What a restarted head reads back."""

    cluster_id: bytes
    incarnation: int
    view: head_pb2.ClusterView | None
    names: dict[str, head_pb2.NamedActor] = field(default_factory=dict)
    killed: set[bytes] = field(default_factory=set)


class HeadState:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.incarnation = 0  # this head's, once ``create`` or ``resume`` has counted it

    async def _on_shard(self, what: str, fn) -> object:
        """``fn(client)`` on the shard of the head's keys (its writes acked by the shard's replicas),
        again while the store is unreachable."""

        async def once() -> object:
            try:
                (result,) = await self.store.per_shard([_CLUSTER], lambda client, _: fn(client), durable=True)
            except ResponseError as exc:  # e.g. LOADING, from a shard restarting: retried
                raise refusal(exc) from exc
            return result

        return await until_reachable(what, once)

    async def _write(self, what: str, source: str, *args: bytes | str) -> None:
        if not await until_reachable(what, script_call, self.store, source, [_CLUSTER, _NAMES, _KILLED],
                                     [self.incarnation, *args]):
            raise SupersededError(f"another head has taken over the cluster since this one (incarnation "
                                  f"{self.incarnation}) started")

    async def create(self, cluster_id: bytes) -> int:
        """A new cluster: forget a former one's state; returns the head's incarnation (1)."""

        async def write(client: Client) -> None:
            async with client.pipeline(transaction=True) as pipe:
                pipe.delete(_CLUSTER, _NAMES, _KILLED, DEAD_EPOCHS)
                pipe.hset(_CLUSTER, mapping={b"id": cluster_id, b"incarnation": 1})
                await pipe.execute()

        await self._on_shard("writing the cluster's identity", write)
        self.incarnation = 1
        return 1

    async def resume(self) -> Restored:
        """The state a head left, with this head's incarnation counted; ClusterError if none."""

        async def read(client: Client) -> tuple:
            async with client.pipeline(transaction=True) as pipe:
                pipe.hincrby(_CLUSTER, b"incarnation", 1)
                pipe.hmget(_CLUSTER, [b"id", b"view"])
                pipe.hgetall(_NAMES)
                pipe.smembers(_KILLED)
                return tuple(await pipe.execute())

        incarnation, (cluster_id, view), names, killed = await self._on_shard("reading the head's state", read)
        if not cluster_id:
            raise ClusterError("the lineage store holds no cluster's state: there is nothing to restart from")
        self.incarnation = int(incarnation)
        return Restored(cluster_id, int(incarnation), head_pb2.ClusterView.FromString(view) if view else None,
                        {name.decode(): head_pb2.NamedActor.FromString(actor) for name, actor in names.items()},
                        set(killed))

    async def save_view(self, view: head_pb2.ClusterView) -> None:
        await self._write("saving the cluster's view", _SAVE_VIEW, view.SerializeToString())

    async def name_taken(self, actor: head_pb2.NamedActor) -> None:
        await self._write("saving an actor's name", _TAKE_NAME, actor.name, actor.SerializeToString())

    async def names_freed(self, actor_id: bytes, names: list[str]) -> None:
        await self._write("freeing an actor's names", _FREE_NAMES, actor_id, *names)
