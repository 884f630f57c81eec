"""TaskSpec records in the sharded store: version-checked writes, acks, reads.

A write carries ``(task_id, version)`` and either the whole spec or, for a newer version, only
what it changes (a ``TaskVersion``: the predecessor and the application log). A Lua script applies
it atomically only if the stored version is older (Definition 4.1), and answers the version the
store now holds. That answer is the ack: the task is committed at that version, and an older
write learns it was superseded. A record holds the spec (``s``, written once, by whoever writes it
first, whatever its version) and the newest delta (``d``) when that is newer than the spec: a spec
is written whole once, however many versions it has.

For recovery the script also indexes each task under its receiver (``rx:{tag}<receiver>``, in the
task's hash slot), so a recovering actor finds every task sent to it; each node slot's actors are
listed under ``actors:{slot-N}``; and ``ckpt:<actor>`` points at an actor's newest checkpoint,
whose covered tasks the collector deletes (``forget``).
"""

from __future__ import annotations

from collections.abc import Sequence

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


# A collected record leaves a tombstone for a while: a version no write can beat, so a write of
# it that was still on its way (a slow flusher) is acked as committed instead of resurrecting it.
TOMBSTONE_VERSION = 2**62
TOMBSTONE_TTL_S = 600

# The keys of one script call must share a hash slot (Redis Cluster) or shard. The {tag} puts a
# task in one of SLOT_GROUPS slots, so a batch needs at most that many calls, spread over the nodes.
SLOT_GROUPS = 64


def _tag(group: int) -> bytes:
    return b"{%02x}" % group


def _group(task_id: bytes) -> int:
    return task_id[-1] % SLOT_GROUPS


def record_key(task_id: bytes) -> bytes:
    return KEY_PREFIX + _tag(_group(task_id)) + task_id


def _index_key(tag: bytes, receiver: bytes) -> bytes:
    return b"rx:" + tag + receiver  # in the slot of the records it indexes


def _actors_key(slot: int) -> bytes:
    return b"actors:{slot-%d}" % slot


def _checkpoint_key(actor_id: bytes) -> bytes:
    return b"ckpt:" + actor_id


def task_id_of(key: bytes) -> bytes:
    return key[len(KEY_PREFIX) + 4:]


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


def _producers(spec: pb.TaskSpec) -> list[bytes]:
    """The tasks whose execution made ``spec``: its parent and its arguments' producers.

    Its predecessor is left out: replay stops at the first gap in an actor's own chain (a
    nondeterministic actor's recorded order, a deterministic one's per-sender counters), so a
    record after a gap is never replayed.
    """
    deps = spec.dependencies
    return [deps[0], *deps[2:]] if deps else []


def dependency_waves(specs: dict[bytes, pb.TaskSpec]) -> list[list[pb.TaskSpec]]:
    """``specs`` (by task ID) in groups to write one after the other: each spec comes in a later
    group than the specs of ``specs`` that produced it."""
    depth: dict[bytes, int] = {}
    for root in specs:
        stack, visiting = [root], set()
        while stack:
            task_id = stack[-1]
            if task_id in depth:
                stack.pop()
                continue
            deps = [d for d in _producers(specs[task_id]) if d in specs and d not in visiting]
            pending = [d for d in deps if d not in depth]
            if pending:  # lineage is acyclic; `visiting` only guards against malformed specs
                visiting.add(task_id)
                stack.extend(pending)
                continue
            depth[task_id] = 1 + max((depth[d] for d in deps), default=-1)
            visiting.discard(task_id)
            stack.pop()
    waves: list[list[pb.TaskSpec]] = [[] for _ in range(1 + max(depth.values(), default=-1))]
    for task_id, level in depth.items():
        waves[level].append(specs[task_id])
    return waves


class LineageStore:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._scripts: dict[int, object] = {}
        self.bytes_written = 0  # payloads of the writes the store applied or acked

    def _script(self, client: Client):
        script = self._scripts.get(id(client))
        if script is None:
            script = self._scripts[id(client)] = client.register_script(_WRITE_IF_NEWER)
        return script

    async def write(self, writes: Sequence[Write]) -> list[tuple[bytes, int]]:
        """Write specs, whole or as the delta of their version (one script call per shard and
        wave); returns ``(task_id, version held)`` acks.

        Of two versions of one task the newer is written, whole if either write was. A spec is
        written only after the specs here that produced it (``dependency_waves``): a process that
        dies half-way through leaves no record in the store whose producer's order is missing
        there, so a recovering actor never replays a task that its sender's replay cannot reproduce.
        """
        newest: dict[bytes, pb.TaskSpec] = {}
        whole: set[bytes] = set()
        for spec, is_whole in writes:
            if spec.task_id not in newest or newest[spec.task_id].version < spec.version:
                newest[spec.task_id] = spec
            if is_whole:
                whole.add(spec.task_id)
        acks: list[tuple[bytes, int]] = []
        for wave in dependency_waves(newest):
            acks.extend(await self._write_wave({record_key(s.task_id): s for s in wave}, whole))
        return acks

    async def _write_wave(self, by_key: dict[bytes, pb.TaskSpec], whole: set[bytes]) -> list[tuple[bytes, int]]:
        async def write_shard(client: Client, keys: list[bytes]) -> list[tuple[bytes, int]]:
            script_keys: list[bytes] = []
            args: list[int | bytes] = []
            for key in keys:
                spec = by_key[key]
                script_keys += [key, _index_key(_tag(_group(spec.task_id)), spec.receiver)]
                if spec.task_id in whole or spec.version == 0:
                    args += [spec.version, b"s", spec.SerializeToString(), spec.task_id]
                else:
                    args += [spec.version, b"d", version_of(spec).SerializeToString(), spec.task_id]
            held = await self._script(client)(keys=script_keys, args=[*args, TOMBSTONE_VERSION])
            self.bytes_written += sum(len(a) for a in args[2::4])
            return [(by_key[k].task_id, int(v)) for k, v in zip(keys, held, strict=True)]

        return [ack for part in await self.store.per_shard(list(by_key), write_shard) for ack in part]

    async def read(self, task_ids: Sequence[bytes]) -> dict[bytes, pb.TaskSpec]:
        """The stored specs of those of ``task_ids`` the store holds."""

        async def read_shard(client: Client, keys: list[bytes]) -> list[tuple[bytes, list[bytes | None]]]:
            async with client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.hmget(key, "s", "d")
                return list(zip(keys, await pipe.execute(), strict=True))

        out: dict[bytes, pb.TaskSpec] = {}
        for part in await self.store.per_shard([record_key(t) for t in task_ids], read_shard):
            for key, (blob, delta) in part:
                if blob is not None:  # a delta alone: the spec never reached the store
                    out[task_id_of(key)] = with_version(pb.TaskSpec.FromString(blob), delta)
        return out

    async def sent_to(self, receiver: bytes) -> dict[bytes, pb.TaskSpec]:
        """Every stored task whose receiver is ``receiver`` (newest versions), by task ID."""
        keys = [_index_key(_tag(group), receiver) for group in range(SLOT_GROUPS)]

        async def members(client: Client, group: list[bytes]) -> list[bytes]:
            async with client.pipeline(transaction=False) as pipe:
                for key in group:
                    pipe.smembers(key)
                return [tid for found in await pipe.execute() for tid in found]

        task_ids = [tid for part in await self.store.per_shard(keys, members) for tid in part]
        return await self.read(task_ids)

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
        """Collect the records of ``task_ids`` (all sent to ``receiver``): each becomes a short-lived
        tombstone, and leaves the receiver's index."""

        async def delete(client: Client, keys: list[bytes]) -> None:
            async with client.pipeline(transaction=False) as pipe:
                for key in keys:
                    task_id = task_id_of(key)
                    pipe.delete(key)
                    pipe.hset(key, "v", TOMBSTONE_VERSION)
                    pipe.expire(key, TOMBSTONE_TTL_S)
                    pipe.srem(_index_key(_tag(_group(task_id)), receiver), task_id)
                await pipe.execute()

        await self.store.per_shard([record_key(t) for t in task_ids], delete)

    async def aclose(self) -> None:
        await self.store.aclose()
