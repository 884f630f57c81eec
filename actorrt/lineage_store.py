"""TaskSpec records in the sharded store: version-checked writes, acks, reads.

A write carries ``(task_id, version, spec)``; a Lua script applies it atomically only if the stored
version is older (Definition 4.1), and answers the version the store now holds. That answer is the
ack: the task is committed at that version, and an older write learns it was superseded.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis.asyncio as aioredis

from actorrt.rpc import common_pb2 as pb
from actorrt.store import ShardedStore

KEY_PREFIX = b"task:"

# KEYS[1] = record; ARGV = version, spec bytes. Returns the version held after the call.
_WRITE_IF_NEWER = """
local held = redis.call('HGET', KEYS[1], 'v')
if held and tonumber(held) >= tonumber(ARGV[1]) then
  return tonumber(held)
end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 's', ARGV[2])
return tonumber(ARGV[1])
"""


def record_key(task_id: bytes) -> bytes:
    return KEY_PREFIX + task_id


class LineageStore:
    def __init__(self, store: ShardedStore) -> None:
        self.store = store
        self._scripts: dict[int, object] = {}

    def _script(self, client: aioredis.Redis):
        script = self._scripts.get(id(client))
        if script is None:
            script = self._scripts[id(client)] = client.register_script(_WRITE_IF_NEWER)
        return script

    async def write(self, specs: Sequence[pb.TaskSpec]) -> list[tuple[bytes, int]]:
        """Write ``specs`` (one pipeline per shard); returns ``(task_id, version held)`` acks."""
        by_key = {record_key(s.task_id): s for s in specs}

        async def write_shard(client: aioredis.Redis, keys: list[bytes]) -> list[tuple[bytes, int]]:
            script = self._script(client)
            async with client.pipeline(transaction=False) as pipe:
                for key in keys:
                    spec = by_key[key]
                    await script(keys=[key], args=[spec.version, spec.SerializeToString()], client=pipe)
                held = await pipe.execute()
            return [(by_key[k].task_id, int(v)) for k, v in zip(keys, held, strict=True)]

        acks: list[tuple[bytes, int]] = []
        for part in await self.store.per_shard(list(by_key), write_shard):
            acks.extend(part)
        return acks

    async def read(self, task_ids: Sequence[bytes]) -> dict[bytes, pb.TaskSpec]:
        """The stored specs of those of ``task_ids`` the store holds."""

        async def read_shard(client: aioredis.Redis, keys: list[bytes]) -> list[bytes | None]:
            async with client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.hget(key, "s")
                return list(zip(keys, await pipe.execute(), strict=True))

        out: dict[bytes, pb.TaskSpec] = {}
        for part in await self.store.per_shard([record_key(t) for t in task_ids], read_shard):
            for key, blob in part:
                if blob is not None:
                    out[key[len(KEY_PREFIX):]] = pb.TaskSpec.FromString(blob)
        return out

    async def aclose(self) -> None:
        await self.store.aclose()
