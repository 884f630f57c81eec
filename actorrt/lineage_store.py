"""TaskSpec records in the sharded store: version-checked writes, acks, reads.

A write carries ``(task_id, version, spec)``; a Lua script applies it atomically only if the stored
version is older (Definition 4.1), and answers the version the store now holds. That answer is the
ack: the task is committed at that version, and an older write learns it was superseded.
"""

from __future__ import annotations

from collections.abc import Sequence

from actorrt.rpc import common_pb2 as pb
from actorrt.store import Client, Store

KEY_PREFIX = b"task:"

# KEYS = records; ARGV = version_1, spec_1, version_2, spec_2, ... Applies each write whose
# version is newer than the one held; returns the version held after the call, per key. One call
# per shard and batch: the per-command cost of a pipeline dominated the per-task cost.
_WRITE_IF_NEWER = """
local held_after = {}
for i, key in ipairs(KEYS) do
  local version = tonumber(ARGV[2 * i - 1])
  local held = tonumber(redis.call('HGET', key, 'v'))
  if held and held >= version then
    held_after[i] = held
  else
    redis.call('HSET', key, 'v', version, 's', ARGV[2 * i])
    held_after[i] = version
  end
end
return held_after
"""


# In a Redis Cluster the keys of one script call must share a hash slot. The {tag} puts a task in
# one of SLOT_GROUPS slots, so a batch needs at most that many calls, and they spread over the
# cluster's nodes. Plain shards ignore the tag (they place keys by the trailing task ID).
SLOT_GROUPS = 64


def record_key(task_id: bytes) -> bytes:
    return b"%s{%02x}%s" % (KEY_PREFIX, task_id[-1] % SLOT_GROUPS, task_id)


def task_id_of(key: bytes) -> bytes:
    return key[len(KEY_PREFIX) + 4:]


class LineageStore:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._scripts: dict[int, object] = {}

    def _script(self, client: Client):
        script = self._scripts.get(id(client))
        if script is None:
            script = self._scripts[id(client)] = client.register_script(_WRITE_IF_NEWER)
        return script

    async def write(self, specs: Sequence[pb.TaskSpec]) -> list[tuple[bytes, int]]:
        """Write ``specs`` (one script call per shard); returns ``(task_id, version held)`` acks.

        Of two versions of one task in ``specs`` the newer is written.
        """
        by_key: dict[bytes, pb.TaskSpec] = {}
        for spec in specs:
            key = record_key(spec.task_id)
            if key not in by_key or by_key[key].version < spec.version:
                by_key[key] = spec

        async def write_shard(client: Client, keys: list[bytes]) -> list[tuple[bytes, int]]:
            args: list[int | bytes] = []
            for key in keys:
                args += [by_key[key].version, by_key[key].SerializeToString()]
            held = await self._script(client)(keys=keys, args=args)
            return [(by_key[k].task_id, int(v)) for k, v in zip(keys, held, strict=True)]

        acks: list[tuple[bytes, int]] = []
        for part in await self.store.per_shard(list(by_key), write_shard):
            acks.extend(part)
        return acks

    async def read(self, task_ids: Sequence[bytes]) -> dict[bytes, pb.TaskSpec]:
        """The stored specs of those of ``task_ids`` the store holds."""

        async def read_shard(client: Client, keys: list[bytes]) -> list[bytes | None]:
            async with client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.hget(key, "s")
                return list(zip(keys, await pipe.execute(), strict=True))

        out: dict[bytes, pb.TaskSpec] = {}
        for part in await self.store.per_shard([record_key(t) for t in task_ids], read_shard):
            for key, blob in part:
                if blob is not None:
                    out[task_id_of(key)] = pb.TaskSpec.FromString(blob)
        return out

    async def aclose(self) -> None:
        await self.store.aclose()
