"""Record lineage in the lineage store: the relations operators capture, and the reads of queries.

The keys of one operator instance share a hash tag (``{flow/stage/instance}``), so that each write
and each read of an instance is one script call on one shard:

- ``…:t`` (sorted set) and ``…:b`` (hash): each task's relation blob (``records.encode``) under the
  seq of its first output; the hash's ``floor`` field is the seq below which retention dropped them.
  A task that emitted nothing (it folded records into keys) is under ``<seq>.<task number>``,
  listed in ``…:z`` (sorted by seq) for retention, not in ``…:t``;
- ``…:f:<code>:<bucket>`` (set): the tasks that took records of sender ``code`` in that bucket of
  its seqs (``records.bucket``), for forward queries;
- ``…:h:<key number>`` (hash): a fold key's history: by position, what each task that folded
  records into it folded and emitted (``records.history_entry``); ``x:<seq>`` fields name the
  records made of the key's state by no entry (a timer's, a final fold's) and the history's
  length they come of.

Every write is idempotent (a replayed task writes the same fields and members again), so a
recovery never records a relation twice. A flow's shape (``flow_key``) is written once by its driver.

Plain actors relate records they name themselves (``actorrt.lineage.relate``): per namespace (one
hash tag), ``rn:{ns}:<name>`` is the set of a record's inputs and ``rnf:{ns}:<name>`` the set of
the records made of it, each kept ``ttl`` seconds after its last write if the relation says so.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from actorrt.store.clients import Store

# KEYS = tasks (sorted set), blobs (hash), tasks that emitted nothing (sorted set), then the sets
# and hashes the ops name by position; ARGV = floor (drop the tasks wholly below it; -1: none),
# history kept per key (0: all), then ops: "t" first field blob | "z" first field blob |
# "d" key | "f" key member | "h" key position entry (deletes come first: they are of older tasks).
RELATE = """
local floor = tonumber(ARGV[1])
local keep = tonumber(ARGV[2])
local i = 3
while i <= #ARGV do
  local op = ARGV[i]
  if op == 't' or op == 'z' then
    redis.call('ZADD', KEYS[op == 't' and 1 or 3], ARGV[i + 1], ARGV[i + 2])
    redis.call('HSET', KEYS[2], ARGV[i + 2], ARGV[i + 3])
    i = i + 4
  elseif op == 'f' then
    redis.call('SADD', KEYS[tonumber(ARGV[i + 1])], ARGV[i + 2])
    i = i + 3
  elseif op == 'h' then
    local key = KEYS[tonumber(ARGV[i + 1])]
    local position = tonumber(ARGV[i + 2])  -- (nil for an "x:<seq>" field: a record made of the key's state)
    redis.call('HSET', key, ARGV[i + 2], ARGV[i + 3])
    if position and keep > 0 and position >= keep then
      redis.call('HDEL', key, position - keep)
      redis.call('HSET', key, 'floor', position - keep + 1)
    end
    i = i + 4
  else
    redis.call('DEL', KEYS[tonumber(ARGV[i + 1])])
    i = i + 2
  end
end
if floor >= 0 then
  local below = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', floor)
  for j = 1, #below - 1 do  -- the last may hold records at or past the floor
    redis.call('HDEL', KEYS[2], below[j])
    redis.call('ZREM', KEYS[1], below[j])
  end
  for _, field in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. floor)) do
    redis.call('HDEL', KEYS[2], field)
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. floor)
  redis.call('HSET', KEYS[2], 'floor', floor)
end
return 1
"""

# KEYS = tasks, blobs; ARGV = seqs. Returns the floor; per seq the first seq of the task that may
# hold it ('' if none); then each of those tasks' first seq and blob, once (many seqs share one).
FIND = """
local out = {redis.call('HGET', KEYS[2], 'floor') or '0'}
local seen = {}
local firsts = {}
for i = 1, #ARGV do
  local first = redis.call('ZREVRANGEBYSCORE', KEYS[1], ARGV[i], '-inf', 'LIMIT', 0, 1)[1] or ''
  out[#out + 1] = first
  if first ~= '' and not seen[first] then
    seen[first] = true
    firsts[#firsts + 1] = first
  end
end
for _, first in ipairs(firsts) do
  out[#out + 1] = first
  out[#out + 1] = redis.call('HGET', KEYS[2], first)
end
return out
"""

# KEYS = blobs, then sets; returns, per set, its members' blobs (a member retention dropped: none).
FORWARD = """
local out = {}
for k = 2, #KEYS do
  local found = {}
  for _, first in ipairs(redis.call('SMEMBERS', KEYS[k])) do
    local blob = redis.call('HGET', KEYS[1], first)
    if blob then
      found[#found + 1] = blob
    end
  end
  out[#out + 1] = found
end
return out
"""

# KEYS = a key's history; returns its floor (0: nothing dropped), then position, entry pairs.
HISTORY = """
local out = {redis.call('HGET', KEYS[1], 'floor') or '0'}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if all[i] ~= 'floor' then
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
return out
"""


# KEYS = per relation: the output's inputs set, then each input's outputs set; ARGV = ttl (0:
# kept), then per relation: its number of inputs, the output's name, the inputs' names.
RELATE_NAMED = """
local ttl = tonumber(ARGV[1])
local k, a = 1, 2
while a <= #ARGV do
  local n = tonumber(ARGV[a])
  local output = ARGV[a + 1]
  for j = 1, n do
    redis.call('SADD', KEYS[k], ARGV[a + 1 + j])
    redis.call('SADD', KEYS[k + j], output)
    if ttl > 0 then
      redis.call('EXPIRE', KEYS[k + j], ttl)
    end
  end
  if ttl > 0 then
    redis.call('EXPIRE', KEYS[k], ttl)
  end
  k, a = k + n + 1, a + n + 2
end
return 1
"""

# KEYS = sets; returns each one's members.
MEMBERS = """
local out = {}
for i = 1, #KEYS do
  out[i] = redis.call('SMEMBERS', KEYS[i])
end
return out
"""


def named_key(namespace: str, name: str, forward: bool = False) -> bytes:
    """The set of a named record's inputs (``forward``: of the records made of it)."""
    return f"{'rnf' if forward else 'rn'}:{{{namespace}}}:{name}".encode()


def instance_prefix(flow: str, stage: int, instance: int) -> bytes:
    return f"rl:{{{flow}/{stage}/{instance}}}".encode()


def flow_key(flow: str) -> bytes:
    return f"rlflow:{{{flow}}}".encode()


def forward_key(prefix: bytes, code: int, bucket: int) -> bytes:
    return b"%s:f:%d:%d" % (prefix, code, bucket)


def history_key(prefix: bytes, key_number: int) -> bytes:
    return b"%s:h:%d" % (prefix, key_number)


@dataclass
class InstanceWrites:
    """What one operator instance has to write: task relations, forward entries, history entries,
    keys to delete, and the floor of its retention."""

    prefix: bytes
    tasks: list[tuple[int, str, bytes]] = field(default_factory=list)  # (first, field, blob)
    forward: list[tuple[int, int, str]] = field(default_factory=list)  # (code, bucket, task's field)
    history: list[tuple[int, int | str, bytes]] = field(default_factory=list)  # (key number, field, entry)
    deletes: list[bytes] = field(default_factory=list)
    floor: int = -1
    keep_history: int = 0

    def merge(self, other: InstanceWrites) -> None:
        self.tasks += other.tasks
        self.forward += other.forward
        self.history += other.history
        self.deletes += other.deletes
        self.floor = max(self.floor, other.floor)
        self.keep_history = other.keep_history

    def script_call(self) -> tuple[list[bytes], list[Any]]:
        keys = [self.prefix + b":t", self.prefix + b":b", self.prefix + b":z"]
        index: dict[bytes, int] = {}

        def at(key: bytes) -> int:
            if key not in index:
                keys.append(key)
                index[key] = len(keys)
            return index[key]

        args: list[Any] = [self.floor, self.keep_history]
        for key in self.deletes:
            args += [b"d", at(key)]
        for first, name, blob in self.tasks:
            args += [b"t" if name == str(first) else b"z", first, name, blob]
        for code, bucket, name in self.forward:
            args += [b"f", at(forward_key(self.prefix, code, bucket)), name]
        for number, position, entry in self.history:
            args += [b"h", at(history_key(self.prefix, number)), position, entry]
        return keys, args


Queued = tuple[dict[bytes, InstanceWrites], dict[tuple[str, int], list[tuple[str, list[str]]]]]


class RelationQueue:
    """Relations waiting for the next flush, per operator instance. They are written only after
    the lineage of the tasks that made them is committed (``Flusher``; ``LoggedLineage.
    write_relations`` before a checkpoint or a sink's commit): were a task's relation in the store
    and its order not, the task's replay could take its inputs in another order and number its
    records otherwise."""

    def __init__(self, store: Store, wake: Any = None) -> None:
        self.store = store
        self._pending: dict[bytes, InstanceWrites] = {}
        self._named: dict[tuple[str, int], list[tuple[str, list[str]]]] = {}  # (namespace, ttl) -> relations
        self._writing = asyncio.Lock()  # one write at a time: a write returns once all queued before it is in
        # Taken and not yet written (a flusher takes them, then waits for their tasks' specs): a
        # drain before a checkpoint writes them too, or the checkpoint would cover tasks whose
        # relations a kill then loses, and a replay from it never relates them again.
        self._out: list[Queued] = []
        self._wake = wake  # called when something is queued
        self.written_tasks = 0

    def __bool__(self) -> bool:
        return bool(self._pending or self._named or self._out)

    def add_named(self, namespace: str, output: str, inputs: list[str], ttl_s: int = 0) -> None:
        """A plain actor's relation: record ``output`` of ``namespace`` came from ``inputs``."""
        self._named.setdefault((namespace, ttl_s), []).append((output, inputs))
        if self._wake is not None:
            self._wake()

    def add(self, writes: InstanceWrites) -> None:
        held = self._pending.get(writes.prefix)
        if held is None:
            self._pending[writes.prefix] = writes
        else:
            held.merge(writes)
        if self._wake is not None:
            self._wake()

    def take(self) -> Queued:
        """What is queued now, taken out (to be written once the lineage of its tasks is)."""
        taken = (self._pending, self._named)
        self._pending, self._named = {}, {}
        if any(taken):
            self._out.append(taken)
        return taken

    async def write(self, queued: Queued) -> None:
        """Write ``queued`` (what ``take`` gave), one script call per instance (instances in
        parallel), after the write under way if any, unless a drain wrote it; what fails is queued
        again for the next try."""
        async with self._writing:
            if any(q is queued for q in self._out):
                self._out = [q for q in self._out if q is not queued]
                await self._write(*queued)

    async def drain(self) -> None:
        """Write everything queued or taken and not written yet (after the write under way)."""
        self.take()
        async with self._writing:
            out, self._out = self._out, []
            for i, queued in enumerate(out):
                try:
                    await self._write(*queued)
                except BaseException:
                    self._out = out[i + 1:] + self._out
                    raise

    async def _write(self, taken: dict[bytes, InstanceWrites], named: dict[tuple[str, int], Any]) -> None:
        try:
            await asyncio.gather(*[self.store.run_script(RELATE, *w.script_call()) for w in taken.values()],
                                 *[self.store.run_script(RELATE_NAMED, *_named_call(ns, ttl, relations))
                                   for (ns, ttl), relations in named.items()])
        except BaseException:
            for prefix, writes in taken.items():  # (idempotent: what did go in is written again)
                if prefix in self._pending:
                    writes.merge(self._pending[prefix])
                self._pending[prefix] = writes
            for key, relations in named.items():
                self._named[key] = relations + self._named.get(key, [])
            raise
        self.written_tasks += sum(len(w.tasks) for w in taken.values())


def _named_call(namespace: str, ttl_s: int, relations: list[tuple[str, list[str]]]) -> tuple[list[bytes], list]:
    keys: list[bytes] = []
    args: list[Any] = [ttl_s]
    for output, inputs in relations:
        keys += [named_key(namespace, output)] + [named_key(namespace, i, forward=True) for i in inputs]
        args += [len(inputs), output, *inputs]
    return keys, args


class RelationReader:
    """The reads a query makes, each one script call per operator instance."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def flow(self, flow: str) -> dict[str, Any] | None:
        """The shape of ``flow`` its driver wrote (``save_flow``), or None."""
        found = await self.store.run_script("return redis.call('GET', KEYS[1])", [flow_key(flow)], [])
        return None if found is None else json.loads(found)

    async def find(self, flow: str, stage: int, instance: int, seqs: Sequence[int]) -> tuple[int, list[bytes | None]]:
        """The floor of the instance's retention, and for each of ``seqs`` the blob of the last task
        whose first output is at or before it (None: no such task)."""
        found = await self.store.run_script(FIND, [instance_prefix(flow, stage, instance) + s for s in (b":t", b":b")],
                                            list(seqs))
        firsts = found[1:len(seqs) + 1]
        rest = found[len(seqs) + 1:]
        blobs = dict(zip(rest[0::2], rest[1::2], strict=True))
        return int(found[0]), [blobs.get(first) if first else None for first in firsts]

    async def forward(self, flow: str, stage: int, instance: int,
                      buckets: Sequence[tuple[int, int]]) -> list[list[bytes]]:
        """Per ``(code, bucket)``: the blobs of the instance's tasks that took such records."""
        prefix = instance_prefix(flow, stage, instance)
        if not buckets:
            return []
        return await self.store.run_script(FORWARD, [prefix + b":b"] + [forward_key(prefix, c, b) for c, b in buckets],
                                           [])

    async def named(self, namespace: str, names: Sequence[str], forward: bool = False) -> list[list[str]]:
        """Per name, its inputs (``forward``: the records made of it)."""
        found = await self.store.run_script(MEMBERS, [named_key(namespace, n, forward) for n in names], [])
        return [sorted(m.decode() for m in members) for members in found]

    async def history(self, flow: str, stage: int, instance: int, number: int) -> tuple[int, dict[bytes, bytes]]:
        """A fold key's history: the first position kept, and its fields (positions, and
        ``x:<seq>``)."""
        found = await self.store.run_script(HISTORY, [history_key(instance_prefix(flow, stage, instance), number)], [])
        return int(found[0]), dict(zip(found[1::2], found[2::2], strict=True))


async def save_flow(store: Store, flow: str, shape: dict[str, Any]) -> None:
    """Write ``flow``'s shape (its stages, their parallelism and channels), which queries read."""
    await store.run_script("redis.call('SET', KEYS[1], ARGV[1]) return 1", [flow_key(flow)], [json.dumps(shape)])


async def footprint(store: Store, flow: str, instances: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """The bytes (Redis ``MEMORY USAGE``) and the number of keys of ``flow``'s record lineage, over
    the given ``(stage, instance)``s (what the benchmark divides by the records captured)."""
    prefixes = [instance_prefix(flow, s, i) for s, i in instances]

    async def measure(client: Any, ks: list[bytes]) -> tuple[int, int]:
        total = keys = 0
        for prefix in ks:
            async for key in client.scan_iter(match=prefix.replace(b"{", b"\\{").replace(b"}", b"\\}") + b"*",
                                              count=1000):
                total += await client.memory_usage(key, samples=0) or 0
                keys += 1
        return total, keys

    parts = await store.per_shard(prefixes, measure)
    return sum(p[0] for p in parts), sum(p[1] for p in parts)
