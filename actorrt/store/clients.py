"""Async clients of the lineage store: K Redis shards with client-side sharding, or a Redis Cluster.

Both spread keys the same way from the caller's view: ``per_shard`` groups keys by where they live
and runs one function per group, groups in parallel, so a batch costs one round trip per shard.

With ``replicas`` (each shard has that many replicas), a write returns once they hold it: a script
call waits on its connection (``WAIT``, see ``script_connection.py``), and a ``durable`` group of
``per_shard`` ends with a script call of its own that does (a replica that holds a later write
holds every earlier one: a shard replicates in the order it applies).

- ``ShardedStore``: a key's shard is its Redis Cluster hash slot modulo K, so any process computes
  the same placement, and keys with one ``{tag}`` share a shard as they would share a slot.
- ``ClusterStore``: the cluster places keys by hash slot; a group is one slot, so a Lua script
  over the group's keys is legal there (all keys of one script call must share a slot).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable, Iterator, Sequence
from itertools import zip_longest
from typing import TypeVar

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.crc import key_slot
from redis.exceptions import RedisClusterException, ResponseError

from actorrt.exceptions import ClusterError, StaleIncarnationError
from actorrt.store.script_connection import ScriptConnection, sync_key
from actorrt.store.tls import StoreTls

log = logging.getLogger(__name__)

T = TypeVar("T")
Client = aioredis.Redis | RedisCluster
ShardFn = Callable[[Client, list[bytes]], Awaitable[T]]

class StoreAuthError(ClusterError):
    """The store refused this process's user or password: waiting does not change that."""


class StoreRefusedError(ClusterError):
    """The store refused a write for a reason that retrying does not change (it is too large, or
    malformed), unlike an unreachable store or a full one."""


# Error replies that go away by themselves: retried like an unreachable store. Redis wraps an error
# raised inside a script ("Error running script ...: -OOM command not allowed ..."), so the code is
# looked for anywhere in the message.
_TRANSIENT = re.compile(r"\b(OOM|BUSY|LOADING|TRYAGAIN|CLUSTERDOWN|MASTERDOWN|READONLY|NOREPLICAS|NOSCRIPT)\b")


def refusal(exc: ResponseError) -> ClusterError:
    """An error reply as what it means: ClusterError if it goes away by itself (a shard loading
    its file, full, failing over), StoreRefusedError if retrying changes nothing."""
    if _TRANSIENT.search(str(exc)):
        return ClusterError(f"the lineage store cannot take writes now: {exc}")
    return StoreRefusedError(f"the lineage store refused the write: {exc}")


async def script_call(store: Store, source: str, keys: list[bytes], args: list) -> object:
    """``store.run_script``, an error reply raised as what it means (``refusal``): ClusterError
    where it goes away by itself (``until_reachable`` retries it), StoreRefusedError for good."""
    try:
        return await store.run_script(source, keys, args)
    except ResponseError as exc:
        raise refusal(exc) from exc


async def until_reachable(what: str, fn: Callable[..., Awaitable[T]], *args, max_backoff: float = 2.0) -> T:
    """``await fn(*args)``, again and again while the store is unreachable (a shard down or
    restarting), backing off: for what must not go on without the store (a recovery's reads)."""
    backoff = 0.05
    while True:
        try:
            return await fn(*args)
        except (StaleIncarnationError, StoreRefusedError, StoreAuthError):
            raise  # this process is replaced, or the store refuses this for good: waiting changes nothing
        except ClusterError as exc:
            log.warning("%s failed (%s); retrying in %.2f s", what, exc, backoff)
        await asyncio.sleep(backoff)
        backoff = min(2 * backoff, max_backoff)


def _retry(retries: int) -> Retry:
    return Retry(ExponentialBackoff(cap=0.5, base=0.01), retries)


def _round_robin(by_place: dict) -> list[int]:
    rounds = zip_longest(*(by_place[place] for place in sorted(by_place)))
    return [i for round_ in rounds for i in round_ if i is not None]


# Called after a durable group's writes, in their slot: with replicas, every script call writes
# there and waits for them (script_connection.py), which covers the group's writes before it.
_SYNC = "return 0"


class _Store:
    """What both stores share: error translation, the grouping contract, durable groups."""

    description = ""

    def __init__(self, replicas: int = 0) -> None:
        self.replicas = replicas

    def _groups(self, keys: Sequence[bytes]) -> list[tuple[Client, list[bytes]]]:
        raise NotImplementedError

    def _place(self, key: bytes) -> str:
        """The address of the server that holds ``key`` now."""
        raise NotImplementedError

    async def spread(self, tags: Sequence[bytes]) -> list[int]:
        """The positions of ``tags`` in an order whose neighbours live on different shards."""
        raise NotImplementedError

    async def per_shard(self, keys: Sequence[bytes], fn: ShardFn, durable: bool = False) -> list[T]:
        """Run ``fn(client, keys_of_one_group)`` for every group holding some of ``keys``, groups in
        parallel (one pipelined round trip each when ``fn`` uses a pipeline or one script call);
        ``durable``: each returns once the shard's replicas hold what ``fn`` wrote."""
        if durable and self.replicas:
            async def then_synced(client: Client, ks: list[bytes]) -> T:
                place = self._place(ks[0])
                result = await fn(client, ks)
                if self._place(ks[0]) != place:  # the sync below would wait on another server
                    raise ClusterError(f"the store shard of {ks[0]!r} moved during a write; try again")
                await script_call(self, _SYNC, [sync_key(ks[0])], [])
                return result

            return await self._gather(then_synced(client, ks) for client, ks in self._groups(keys))
        return await self._gather(fn(client, ks) for client, ks in self._groups(keys))

    async def run_script(self, source: str, keys: list[bytes], args: list) -> object:
        """Run the Lua script ``source`` over ``keys`` (all in one group) and ``args``, on a lean
        connection of the store's own (``script_connection.py``) rather than redis-py's."""
        raise NotImplementedError

    async def shard_info(self, section: str = "default") -> dict[str, dict | BaseException]:
        """Each primary's ``INFO section``, by address (or the error that shard gave)."""
        raise NotImplementedError

    async def replicas_connected(self) -> dict[str, int]:
        """How many replicas each shard has connected now, by address."""
        infos = await self.shard_info("replication")
        for info in infos.values():
            if isinstance(info, BaseException):
                with self._errors_translated():
                    raise info
        return {address: int(info.get("connected_slaves", 0)) for address, info in infos.items()}

    async def _gather(self, coros) -> list:
        with self._errors_translated():
            return await asyncio.gather(*coros)

    @contextlib.contextmanager
    def _errors_translated(self) -> Iterator[None]:
        """The client's errors of an unreachable store, or of a wrong password, as ClusterError."""
        try:
            yield
        except aioredis.AuthenticationError as exc:
            raise StoreAuthError(f"the lineage store refused the password: {exc}") from exc
        except (aioredis.ConnectionError, aioredis.TimeoutError, RedisClusterException, OSError) as exc:
            raise ClusterError(f"lineage store unreachable ({self.description}): {exc}") from exc
        except RuntimeError as exc:
            # uvloop's answer to a write on a connection the server closed as the client opened it
            # (a shard dying just then), which redis-py lets through.
            if "handler is closed" not in str(exc):
                raise
            raise ClusterError(f"lineage store unreachable ({self.description}): {exc}") from exc


class ShardedStore(_Store):
    def __init__(self, addresses: Sequence[str], password: str | None = None, retries: int = 3,
                 username: str | None = None, tls: StoreTls | None = None, replicas: int = 0) -> None:
        if not addresses:
            raise ValueError("the lineage store needs at least one shard address")
        super().__init__(replicas)
        self._password, self._username, self._tls, self._retries = password, username, tls, retries
        self.addresses: list[str] = []
        self._scripts: list[ScriptConnection] = []
        self._clients: list[aioredis.Redis] = []
        self.follow(addresses)

    def follow(self, addresses: Sequence[str]) -> None:
        """Shards ``addresses`` from now on (as many as before): a shard's replica promoted in its
        place serves at another address. Calls under way on a former address fail as on a dead shard."""
        if self.addresses and len(addresses) != len(self.addresses):
            raise ValueError(f"the store has {len(self.addresses)} shards, not {len(addresses)}")
        for i, address in enumerate(addresses):
            if i < len(self.addresses) and self.addresses[i] == address:
                continue
            host, _, port = address.rpartition(":")
            script = ScriptConnection(address, self._password, self._username, self._tls, self.replicas)
            client = aioredis.Redis(
                host=host, port=int(port), username=self._username, password=self._password,
                socket_connect_timeout=2.0, retry=_retry(self._retries),
                **(self._tls.redis_kwargs() if self._tls else {}),
            )
            if i < len(self.addresses):
                self._closing(self._scripts[i].aclose(), self._clients[i].aclose())
                self.addresses[i], self._scripts[i], self._clients[i] = address, script, client
            else:
                self.addresses.append(address)
                self._scripts.append(script)
                self._clients.append(client)
        self.description = ", ".join(self.addresses)

    @staticmethod
    def _closing(*closes: Awaitable[None]) -> None:
        async def close() -> None:
            await asyncio.gather(*closes, return_exceptions=True)

        with contextlib.suppress(RuntimeError):  # no loop runs (a store made before it): nothing is open
            asyncio.get_running_loop().create_task(close())

    def shard_of(self, key: bytes) -> int:
        return key_slot(key) % len(self._clients)

    def _place(self, key: bytes) -> str:
        return self.addresses[self.shard_of(key)]

    async def run_script(self, source: str, keys: list[bytes], args: list) -> object:
        # The hot path (every flush): a lean connection of its own rather than redis-py's.
        with self._errors_translated():
            return await self._scripts[self.shard_of(keys[0])].run_script(source, keys, args)

    def _groups(self, keys: Sequence[bytes]) -> list[tuple[Client, list[bytes]]]:
        groups: dict[int, list[bytes]] = {}
        for key in keys:
            groups.setdefault(self.shard_of(key), []).append(key)
        return [(self._clients[shard], ks) for shard, ks in groups.items()]

    async def spread(self, tags: Sequence[bytes]) -> list[int]:
        by_shard: dict[int, list[int]] = {}
        for i, tag in enumerate(tags):
            by_shard.setdefault(self.shard_of(tag), []).append(i)
        return _round_robin(by_shard)

    async def shard_info(self, section: str = "default") -> dict[str, dict | BaseException]:
        infos = await asyncio.gather(*(client.info(section) for client in self._clients), return_exceptions=True)
        return dict(zip(self.addresses, infos, strict=True))

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()
        for connection in self._scripts:
            await connection.aclose()


class ClusterStore(_Store):
    """A Redis Cluster reached through any of its nodes; the client follows slot moves itself.
    Script calls go on a lean connection per node (as ``ShardedStore``'s), and follow a slot that
    moved (a replica promoted in a failed node's place) by reading the slot map again."""

    def __init__(self, seeds: Sequence[str], password: str | None = None, retries: int = 3,
                 username: str | None = None, tls: StoreTls | None = None, replicas: int = 0) -> None:
        if not seeds:
            raise ValueError("a Redis Cluster store needs at least one seed address")
        super().__init__(replicas)
        self._connect = (password, username, tls, replicas)
        self._scripts: dict[str, ScriptConnection] = {}  # by node address
        self.description = f"Redis Cluster via {', '.join(seeds)}"
        nodes = [ClusterNode(host, int(port)) for host, _, port in (s.rpartition(":") for s in seeds)]
        self._client = RedisCluster(startup_nodes=nodes, username=username, password=password,
                                    socket_connect_timeout=2.0, retry=_retry(retries),
                                    **(tls.redis_kwargs() if tls else {}))
        self._initialized = asyncio.Lock()

    def _place(self, key: bytes) -> str:
        return self._client.get_node_from_key(key).name

    async def _slot_map(self) -> None:
        # Learnt once, before parallel calls: redis-py's cluster client races when several first
        # commands each try to initialize it.
        async with self._initialized:
            await self._gather([self._client.initialize()])

    async def per_shard(self, keys: Sequence[bytes], fn: ShardFn, durable: bool = False) -> list[T]:
        await self._slot_map()
        return await super().per_shard(keys, fn, durable)

    async def run_script(self, source: str, keys: list[bytes], args: list) -> object:
        for _ in range(3):
            await self._slot_map()
            node = self._client.get_node_from_key(keys[0])
            script = self._scripts.get(node.name)
            if script is None:
                script = self._scripts[node.name] = ScriptConnection(node.name, *self._connect)
            try:
                with self._errors_translated():
                    return await script.run_script(source, keys, args)
            except ResponseError as exc:
                if not str(exc).startswith(("MOVED", "ASK", "CLUSTERDOWN")):
                    raise
                moved = exc
            except ClusterError:
                await self._reread_slot_map()  # the node may be gone, a replica promoted in its place
                raise
            await self._reread_slot_map()
        raise refusal(moved)

    async def _reread_slot_map(self) -> None:
        async with self._initialized:
            self._client._initialize = True  # redis-py's flag: read the slot map at the next command
            with contextlib.suppress(ClusterError):
                await self._gather([self._client.initialize()])

    def _groups(self, keys: Sequence[bytes]) -> list[tuple[Client, list[bytes]]]:
        groups: dict[int, list[bytes]] = {}
        for key in keys:
            groups.setdefault(self._client.keyslot(key), []).append(key)
        return [(self._client, ks) for ks in groups.values()]

    async def spread(self, tags: Sequence[bytes]) -> list[int]:
        async with self._initialized:
            await self._gather([self._client.initialize()])
        by_node: dict[str, list[int]] = {}
        for i, tag in enumerate(tags):
            by_node.setdefault(self._client.get_node_from_key(tag).name, []).append(i)
        return _round_robin(by_node)

    async def shard_info(self, section: str = "default") -> dict[str, dict | BaseException]:
        await self._slot_map()
        (infos,) = await self._gather([self._client.info(section, target_nodes=RedisCluster.PRIMARIES)])
        return infos

    async def aclose(self) -> None:
        await self._client.aclose()
        for connection in self._scripts.values():
            await connection.aclose()


Store = ShardedStore | ClusterStore
