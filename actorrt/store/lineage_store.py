"""TaskSpec records in the sharded store: version-checked writes, acks, reads.

A write carries ``(task_id, version)`` and either the whole spec or, for a newer version, only
what it changes (a ``TaskVersion``: the predecessor and the application log). A Lua script applies
it atomically only if the stored version is older (Definition 4.1), and answers the version the
store now holds. That answer is the ack: the task is committed at that version, and an older
write learns it was superseded. A record holds the spec (``s``, written once, by whoever writes it
first, whatever its version) and the newest delta (``d``) when that is newer than the spec: a spec
is written whole once, however many versions it has.

Each process writes into its own slot group (``{tag}`` in every key it writes), spread over the
shards, so a batch is one atomic script call: a process that dies leaves each batch whole or
absent, and a spec never reaches the store without the producers this process wrote before it
(paper §4.2.2: a task commits after its lineage). Ordering a batch's writes across shards instead
took one round trip per link of a chain, which fell behind a fast chain of tasks for good. A task
that several processes write has a record in each of their groups; a read takes the newest.

For recovery the script also indexes each task under its receiver (``rx:{tag}<receiver>``, in the
group of the record), so a recovering actor finds every task sent to it; each node slot's actors
are listed under ``actors:{slot-N}``; and ``ckpt:<actor>`` points at an actor's newest checkpoint,
whose covered tasks the collector deletes (``forget``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

from actorrt.rpc import common_pb2 as pb
from actorrt.store.clients import Client, Store

KEY_PREFIX = b"task:"

# KEYS = record_1, index_1, record_2, index_2, ...; ARGV = version_1, kind_1, payload_1, task_id_1, ...
# with kind "s" (the whole spec) or "d" (a TaskVersion). Applies each write whose version is newer
# than the one held, keeps a spec that arrives after a newer delta (unless the record was
# collected: a tombstone), and indexes the task under its receiver; returns the version held after
# the call, per record (-1 while the record has a delta but no spec: nothing is committed yet).
# One call per shard (or slot group) and batch: the per-command cost of a pipeline dominated the
# per-task cost, and Redis fsyncs once for the whole call. The last ARGV is the tombstone version.
_WRITE_IF_NEWER = """
local held_after = {}
for i = 1, #KEYS / 2 do
  local key = KEYS[2 * i - 1]
  local version = tonumber(ARGV[4 * i - 3])
  local kind = ARGV[4 * i - 2]
  local held = tonumber(redis.call('HGET', key, 'v'))
  if held and held >= version then
    if kind == 's' and held < tonumber(ARGV[#ARGV]) then
      redis.call('HSETNX', key, 's', ARGV[4 * i - 1])
    end
    held_after[i] = held
  else
    if kind == 's' then
      redis.call('HSET', key, 'v', version, 's', ARGV[4 * i - 1])
      redis.call('HDEL', key, 'd')
    else
      redis.call('HSET', key, 'v', version, 'd', ARGV[4 * i - 1])
    end
    redis.call('SADD', KEYS[2 * i], ARGV[4 * i])
    held_after[i] = version
  end
  if held_after[i] < tonumber(ARGV[#ARGV]) and redis.call('HEXISTS', key, 's') == 0 then
    held_after[i] = -1  -- a delta without its spec: nothing a replay could run is committed yet
  end
end
return held_after
"""


# Deletes the records of ARGV[1..n] that the receiver index KEYS[1] lists (KEYS[2..n+1] are their
# records, in the index's group), leaving tombstones; ARGV[n+1], ARGV[n+2]: tombstone version, TTL.
_FORGET = """
local n = #KEYS - 1
for i = 1, n do
  if redis.call('SREM', KEYS[1], ARGV[i]) == 1 then
    redis.call('DEL', KEYS[i + 1])
    redis.call('HSET', KEYS[i + 1], 'v', ARGV[n + 1])
    redis.call('EXPIRE', KEYS[i + 1], ARGV[n + 2])
  end
end
return 0
"""

# A collected record leaves a tombstone for a while: a version no write can beat, so a write of
# it that was still on its way (a slow flusher) is acked as committed instead of resurrecting it.
# (A late first write by another process lands in its own group and is left there: replay starts
# after the checkpoint that covers it, so it only takes space.)
TOMBSTONE_VERSION = 2**62
TOMBSTONE_TTL_S = 600

# The keys of one script call must share a hash slot (Redis Cluster) or shard. A writer's records
# all carry its group's {tag}; there are SLOT_GROUPS groups, spread over the shards or slots.
SLOT_GROUPS = 64


def _tag(group: int) -> bytes:
    return b"{%02x}" % group


def record_key(group: int, task_id: bytes) -> bytes:
    return KEY_PREFIX + _tag(group) + task_id


def _index_key(group: int, receiver: bytes) -> bytes:
    return b"rx:" + _tag(group) + receiver  # in the slot of the records it indexes


def task_id_of(key: bytes) -> bytes:
    return key[len(record_key(0, b"")):]  # after the prefix and the {tag}


def _actors_key(slot: int) -> bytes:
    return b"actors:{slot-%d}" % slot


def _checkpoint_key(actor_id: bytes) -> bytes:
    return b"ckpt:" + actor_id


async def writer_groups(store: Store) -> list[int]:
    """The slot groups in the order writers take them: consecutive writers land on different
    shards (Redis Cluster nodes)."""
    return await store.spread([_tag(g) for g in range(SLOT_GROUPS)])


Write = tuple[pb.TaskSpec, bool]  # a spec, and whether to write it whole (else the delta of its version)


def version_of(spec: pb.TaskSpec) -> pb.TaskVersion:
    """What ``spec``'s version changes (the rest of a task's spec never changes)."""
    return pb.TaskVersion(version=spec.version, predecessor_id=spec.predecessor_id,
                          application_log=spec.application_log)


def with_version(spec: pb.TaskSpec, delta: bytes | None) -> pb.TaskSpec:
    """``spec`` at the version of ``delta`` (a serialized ``TaskVersion``), if that is newer."""
    if delta is not None:
        version = pb.TaskVersion.FromString(delta)
        if version.version > spec.version:
            spec.version = version.version
            spec.predecessor_id = version.predecessor_id
            if len(spec.dependencies) > 1:
                spec.dependencies[1] = version.predecessor_id  # dependencies = [parent, predecessor] + producers
            del spec.application_log[:]
            spec.application_log.extend(version.application_log)
    return spec


def newest(copies: Iterable[tuple[bytes | None, bytes | None]]) -> pb.TaskSpec | None:
    """A task's spec at the newest version its records (``(spec, delta)`` per group) hold; None
    if none holds the spec: a version without its spec is nothing a replay could run."""
    copies = list(copies)
    specs = [with_version(pb.TaskSpec.FromString(blob), delta) for blob, delta in copies if blob is not None]
    if not specs:
        return None
    best = max(specs, key=lambda s: s.version)
    for _, delta in copies:
        best = with_version(best, delta)
    return best


class LineageStore:
    """The lineage store as one process uses it: ``writer`` (a node's slot; any number for a
    driver) picks the slot group it writes into."""

    def __init__(self, store: Store, writer: int = 0) -> None:
        self.store = store
        self._writer = writer
        self.group = -1  # known at the first write (a Redis Cluster is asked where slots live)
        self._scripts: dict[tuple[int, str], object] = {}
        self.bytes_written = 0  # payloads of the writes the store applied or acked

    def _script(self, client: Client, source: str):
        script = self._scripts.get((id(client), source))
        if script is None:
            script = self._scripts[(id(client), source)] = client.register_script(source)
        return script

    async def write(self, writes: Sequence[Write]) -> list[tuple[bytes, int]]:
        """Write specs, whole or as the delta of their version, in one atomic script call; returns
        ``(task_id, version held)`` acks. Of two versions of one task the newer is written, whole
        if either write was."""
        latest: dict[bytes, pb.TaskSpec] = {}
        whole: set[bytes] = set()
        for spec, is_whole in writes:
            if spec.task_id not in latest or latest[spec.task_id].version < spec.version:
                latest[spec.task_id] = spec
            if is_whole:
                whole.add(spec.task_id)
        if not latest:
            return []
        if self.group < 0:
            groups = await writer_groups(self.store)
            self.group = groups[self._writer % len(groups)]
        keys: list[bytes] = []
        args: list[int | bytes] = []
        for spec in latest.values():
            keys += [record_key(self.group, spec.task_id), _index_key(self.group, spec.receiver)]
            if spec.task_id in whole or spec.version == 0:
                args += [spec.version, b"s", spec.SerializeToString(), spec.task_id]
            else:
                args += [spec.version, b"d", version_of(spec).SerializeToString(), spec.task_id]

        async def write_group(client: Client, _: list[bytes]) -> list[int]:
            return await self._script(client, _WRITE_IF_NEWER)(keys=keys, args=[*args, TOMBSTONE_VERSION])

        (held,) = await self.store.per_shard(keys[:1], write_group)  # every key is in this group
        self.bytes_written += sum(len(a) for a in args[2::4])
        return [(task_id, int(v)) for task_id, v in zip(latest, held, strict=True)]

    async def _read_records(self, keys: Sequence[bytes]) -> dict[bytes, pb.TaskSpec]:
        """The tasks whose records are ``keys`` (of any groups), each at its newest version."""

        async def read_shard(client: Client, ks: list[bytes]) -> list[tuple[bytes, list[bytes | None]]]:
            async with client.pipeline(transaction=False) as pipe:
                for key in ks:
                    pipe.hmget(key, "s", "d")
                return list(zip(ks, await pipe.execute(), strict=True))

        copies: dict[bytes, list[tuple[bytes | None, bytes | None]]] = {}
        for part in await self.store.per_shard(keys, read_shard):
            for key, (blob, delta) in part:
                copies.setdefault(task_id_of(key), []).append((blob, delta))
        found = {task_id: newest(c) for task_id, c in copies.items()}
        return {task_id: spec for task_id, spec in found.items() if spec is not None}

    async def read(self, task_ids: Sequence[bytes]) -> dict[bytes, pb.TaskSpec]:
        """The stored specs of those of ``task_ids`` the store holds, whoever wrote them (it looks
        in every group: for inspection; recovery reads by receiver)."""
        return await self._read_records([record_key(g, t) for t in task_ids for g in range(SLOT_GROUPS)])

    async def _indexed(self, receiver: bytes) -> dict[int, list[bytes]]:
        """The task IDs indexed under ``receiver``, per group."""
        keys = [_index_key(g, receiver) for g in range(SLOT_GROUPS)]
        group_of = {key: g for g, key in enumerate(keys)}

        async def members(client: Client, ks: list[bytes]) -> list[tuple[int, list[bytes]]]:
            async with client.pipeline(transaction=False) as pipe:
                for key in ks:
                    pipe.smembers(key)
                return [(group_of[k], list(found)) for k, found in zip(ks, await pipe.execute(), strict=True)]

        return {g: tids for part in await self.store.per_shard(keys, members) for g, tids in part if tids}

    async def sent_to(self, receiver: bytes) -> dict[bytes, pb.TaskSpec]:
        """Every stored task whose receiver is ``receiver`` (newest versions), by task ID."""
        indexed = await self._indexed(receiver)
        return await self._read_records([record_key(g, t) for g, tids in indexed.items() for t in tids])

    async def register_actor(self, slot: int, actor_id: bytes) -> None:
        """Record that ``actor_id`` lives on node slot ``slot`` (awaited: a restarted slot must
        find every actor that ever ran there)."""
        key = _actors_key(slot)

        async def add(client: Client, _: list[bytes]) -> None:
            await client.sadd(key, actor_id)

        await self.store.per_shard([key], add)

    async def actors_on(self, slot: int) -> list[bytes]:
        key = _actors_key(slot)

        async def members(client: Client, _: list[bytes]) -> list[bytes]:
            return sorted(await client.smembers(key))

        return (await self.store.per_shard([key], members))[0]

    async def set_checkpoint(self, actor_id: bytes, seq: int, path: str) -> None:
        """``actor_id``'s newest checkpoint is number ``seq``, in file ``path``."""
        key = _checkpoint_key(actor_id)

        async def put(client: Client, _: list[bytes]) -> None:
            await client.hset(key, mapping={"seq": seq, "path": path})

        await self.store.per_shard([key], put)

    async def checkpoint_of(self, actor_id: bytes) -> tuple[int, str] | None:
        """``(seq, path)`` of ``actor_id``'s newest checkpoint, or None if it has none."""
        key = _checkpoint_key(actor_id)

        async def get(client: Client, _: list[bytes]) -> tuple[int, str] | None:
            found = await client.hgetall(key)
            return (int(found[b"seq"]), found[b"path"].decode()) if found else None

        return (await self.store.per_shard([key], get))[0]

    async def forget(self, receiver: bytes, task_ids: Sequence[bytes]) -> None:
        """Collect the records of ``task_ids`` (all sent to ``receiver``) in every group that holds
        one: each becomes a short-lived tombstone, and leaves the receiver's index."""
        group_of = {_index_key(g, receiver): g for g in range(SLOT_GROUPS)}

        async def delete(client: Client, indexes: list[bytes]) -> None:
            script = self._script(client, _FORGET)
            await asyncio.gather(*(
                script(keys=[index, *(record_key(group_of[index], t) for t in task_ids)],
                       args=[*task_ids, TOMBSTONE_VERSION, TOMBSTONE_TTL_S])
                for index in indexes))

        if task_ids:
            await self.store.per_shard(list(group_of), delete)

    async def aclose(self) -> None:
        await self.store.aclose()
