"""TaskSpec records in the sharded store: version-checked writes, acks, reads.

A write carries ``(task_id, version)`` and either the whole spec or, for a newer version, only
what it changes (a ``TaskVersion``: the predecessor and the application log). A Lua script (``scripts.py``) applies
it atomically only if the stored version is older (Definition 4.1), and answers the version the
store now holds. That answer is the ack: the task is committed at that version, and an older
write learns it was superseded. A record holds the spec (``s``, written once, by whoever writes it
first, whatever its version) and the newest delta (``d``) when that is newer than the spec: a spec
is written whole once, however many versions it has.

Each process writes into its own slot group (``{tag}`` in every key it writes), spread over the
shards, so a batch is one atomic script call (or a few in order, past ``MAX_CALL_BYTES``): a
process that dies leaves each call whole or absent, and a spec never reaches the store without
the producers this process wrote before it (paper §4.2.2: a task commits after its lineage).
Ordering a batch's writes across shards instead took one round trip per link of a chain, which
fell behind a fast chain of tasks for good. A task that several processes write has a record in
each of their groups; a read takes the newest.

For recovery the script also indexes each task under its receiver (``rx:{tag}<receiver>``, in the
group of the record), so a recovering actor finds every task sent to it; each node slot's actors
are listed under ``actors:{slot-N}``; and ``ckpt:{tag}<actor>`` points at an actor's newest
checkpoint, whose covered tasks the collector deletes (``forget``).

A node writes as one incarnation (epoch) of its slot. The incarnation that takes a slot over (its
restart, or the heir of a slot that will not come back) raises the slot's fence before it reads
what the slot wrote, and the scripts refuse writes from earlier epochs: a node that hung, was
declared dead and then resumed cannot add lineage or move a checkpoint pointer after its
replacement has read them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from redis.exceptions import ResponseError

from actorrt.exceptions import StaleIncarnationError
from actorrt.rpc import common_pb2 as pb
from actorrt.store import scripts
from actorrt.store.clients import Client, Store, refusal, script_call
from actorrt.util.lease import Lease

KEY_PREFIX = b"task:"

# A collected record leaves a tombstone for a while: a version no write can beat, so a write of
# it that was still on its way (a slow flusher) is acked as committed instead of resurrecting it.
# (A late first write by another process lands in its own group and is left there: replay starts
# after the checkpoint that covers it, so it only takes space.)
TOMBSTONE_VERSION = 2**62
TOMBSTONE_TTL_S = 600

# A batch is split into script calls of about this many payload bytes (Redis takes at most 1 GiB in
# one command, and a long script blocks the shard).
MAX_CALL_BYTES = 64 << 20
# Records read in one script call: big enough that the client's per-command cost vanishes, small
# enough that the shard is not blocked for long (~5 ms).
MAX_READ_KEYS = 5000

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


class Pointer(NamedTuple):
    """An actor's newest checkpoint: its number and file, and the newest of its checkpoints
    announced to every process (this one, unless it was taken for a standby to load first)."""

    seq: int
    path: str
    announced: int


def _standbys_key(slot: int) -> bytes:
    return b"standbys:{slot-%d}" % slot


def _checkpoint_key(group: int, actor_id: bytes) -> bytes:
    return b"ckpt:" + _tag(group) + actor_id  # with the fence of the slot that writes it


def _fence_key(group: int, writer: int) -> bytes:
    return b"fence:" + _tag(group) + b"%d" % writer


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
    driver) picks the slot group it writes into. A node writes as incarnation ``epoch`` of its
    slot, under ``lease``: the store refuses the writes of an incarnation that another one has
    fenced off, and a process writes nothing while its lease is over."""

    def __init__(self, store: Store, writer: int = 0, epoch: int = 0, lease: Lease | None = None) -> None:
        self.store = store
        self._writer = writer
        self._epoch = epoch
        self._lease = lease if lease is not None else Lease()
        self.group = -1  # known at the first write (a Redis Cluster is asked where slots live)
        self._groups: list[int] = []
        self.bytes_written = 0  # payloads of the writes the store applied or acked

    async def _group_of(self, writer: int) -> int:
        if not self._groups:
            self._groups = await writer_groups(self.store)
        return self._groups[writer % len(self._groups)]

    async def _own_group(self) -> int:
        """The slot group this process writes into (learnt at the first write)."""
        if self.group < 0:
            self.group = await self._group_of(self._writer)
        return self.group

    async def _fenced_call(self, source: str, keys: list[bytes], args: list) -> list:
        """Run a script that starts with the fence check, as this writer, in its group."""
        await self._lease.held()
        try:
            result = await self.store.run_script(source, keys, args)  # every key is in this group
        except ResponseError as exc:
            if str(exc).startswith("FENCED"):
                why = f"the lineage store refused a write of node slot {self._writer} (epoch {self._epoch}): {exc}"
                self._lease.revoke(why)
                raise StaleIncarnationError(why) from None
            raise refusal(exc) from exc
        return result

    async def fence(self, slot: int, epoch: int) -> None:
        """From now on, refuse the writes of node slot ``slot``'s incarnations before ``epoch``
        (the incarnation that takes over, or the heir of a slot that will not come back, calls
        this before it reads what the slot wrote)."""
        # In every group: the one a writer took depends on where the groups lived when it started.
        keys = [_fence_key(g, slot) for g in range(SLOT_GROUPS)]

        # Each call returns once the shard's replicas hold it (script_connection.py).
        await asyncio.gather(*(script_call(self.store, scripts.RAISE_FENCE, [key], [epoch]) for key in keys))

    async def write(self, writes: Sequence[Write]) -> list[tuple[bytes, int]]:
        """Write specs, whole or as the delta of their version, in one atomic script call (in order,
        in several past ``MAX_CALL_BYTES``); returns ``(task_id, version held)`` acks. Of two
        versions of one task the newer is written, whole if either write was."""
        latest: dict[bytes, pb.TaskSpec] = {}
        whole: set[bytes] = set()
        for spec, is_whole in writes:
            if spec.task_id not in latest or latest[spec.task_id].version < spec.version:
                latest[spec.task_id] = spec
            if is_whole:
                whole.add(spec.task_id)
        if not latest:
            return []
        group = await self._own_group()
        calls: list[tuple[list[bytes], list[int | bytes]]] = []  # (keys, args) per script call
        size = MAX_CALL_BYTES
        for spec in latest.values():
            if size >= MAX_CALL_BYTES:  # in order: what a later call holds depends on earlier ones only
                calls.append(([_fence_key(group, self._writer)], [TOMBSTONE_VERSION, self._epoch]))
                size = 0
            if spec.task_id in whole or spec.version == 0:
                payload, kind = spec.SerializeToString(), b"s"
            else:
                payload, kind = version_of(spec).SerializeToString(), b"d"
            keys, args = calls[-1]
            keys += [record_key(group, spec.task_id), _index_key(group, spec.receiver)]
            args += [spec.version, kind, payload, spec.task_id]
            size += len(payload)
        held: list[int] = []
        for keys, args in calls:
            held += await self._fenced_call(scripts.WRITE_IF_NEWER, keys, args)
            self.bytes_written += sum(len(a) for a in args[4::4])  # the payloads
        return [(task_id, int(v)) for task_id, v in zip(latest, held, strict=True)]

    async def _read_records(self, keys: Sequence[bytes]) -> dict[bytes, pb.TaskSpec]:
        """The tasks whose records are ``keys`` (of any groups), each at its newest version."""

        async def read_shard(_: Client, ks: list[bytes]) -> list[tuple[bytes, bytes | None, bytes | None]]:
            found = []
            for start in range(0, len(ks), MAX_READ_KEYS):
                part = ks[start:start + MAX_READ_KEYS]
                fields = await self.store.run_script(scripts.READ_RECORDS, part, [])
                found += zip(part, fields[0::2], fields[1::2], strict=True)
            return found

        copies: dict[bytes, list[tuple[bytes | None, bytes | None]]] = {}
        for part in await self.store.per_shard(keys, read_shard):
            for key, blob, delta in part:
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
        await self._lease.held()

        async def add(client: Client, _: list[bytes]) -> None:
            await client.sadd(key, actor_id)

        await self.store.per_shard([key], add, durable=True)

    async def actors_on(self, slot: int) -> list[bytes]:
        key = _actors_key(slot)

        async def members(client: Client, _: list[bytes]) -> list[bytes]:
            return sorted(await client.smembers(key))

        return (await self.store.per_shard([key], members))[0]

    async def set_standby(self, slot: int, actor_id: bytes, standby: int | None) -> None:
        """``actor_id``, on node slot ``slot``, keeps its standby on slot ``standby`` (None: none now)."""
        key = _standbys_key(slot)
        await self._lease.held()

        async def put(client: Client, _: list[bytes]) -> None:
            await (client.hdel(key, actor_id) if standby is None else client.hset(key, actor_id, standby))

        await self.store.per_shard([key], put, durable=True)

    async def set_checkpoint(self, actor_id: bytes, seq: int, path: str, announced: int | None = None) -> None:
        """``actor_id``'s newest checkpoint is number ``seq``, in file ``path`` (in this writer's
        group, under its fence: a stale incarnation cannot point a recovery at its state).
        ``announced`` (``seq`` if None): no replay may start before that checkpoint any more (its
        collection follows this write)."""
        group = await self._own_group()
        keys = [_fence_key(group, self._writer), _checkpoint_key(group, actor_id)]
        await self._fenced_call(scripts.SET_CHECKPOINT, keys, [seq, self._epoch, path,
                                                               seq if announced is None else announced])

    async def set_announced(self, actor_id: bytes, seq: int) -> None:
        """``actor_id``'s checkpoint ``seq`` is about to be announced to every process: a standby's
        copy older than it may no longer be replayed from."""
        group = await self._own_group()
        keys = [_fence_key(group, self._writer), _checkpoint_key(group, actor_id)]
        await self._fenced_call(scripts.SET_ANNOUNCED, keys, [seq, self._epoch])

    async def checkpoint_of(self, actor_id: bytes) -> Pointer | None:
        """``actor_id``'s newest checkpoint, or None if it has none (whichever group holds it: an
        actor rebuilt on an heir checkpoints in the heir's group)."""
        keys = [_checkpoint_key(g, actor_id) for g in range(SLOT_GROUPS)]

        async def get(client: Client, ks: list[bytes]) -> list[Pointer]:
            async with client.pipeline(transaction=False) as pipe:
                for key in ks:
                    pipe.hgetall(key)
                return [Pointer(int(f[b"seq"]), f[b"path"].decode(), int(f.get(b"announced", f[b"seq"])))
                        for f in await pipe.execute() if f]

        found = [pointer for part in await self.store.per_shard(keys, get) for pointer in part]
        return max(found, default=None)

    async def forget(self, receiver: bytes, task_ids: Sequence[bytes]) -> None:
        """Collect the records of ``task_ids`` (all sent to ``receiver``) in every group that holds
        one: each becomes a short-lived tombstone, and leaves the receiver's index."""
        group_of = {_index_key(g, receiver): g for g in range(SLOT_GROUPS)}

        async def delete(client: Client, indexes: list[bytes]) -> None:
            # Only groups that hold some record for the receiver: most hold none (the receiver's
            # own node writes nearly all of them), and a call names every task twice.
            async with client.pipeline(transaction=False) as pipe:
                for index in indexes:
                    pipe.exists(index)
                held = [index for index, found in zip(indexes, await pipe.execute(), strict=True) if found]
            await asyncio.gather(*(
                self.store.run_script(scripts.FORGET, [index, *(record_key(group_of[index], t) for t in task_ids)],
                                      [*task_ids, TOMBSTONE_VERSION, TOMBSTONE_TTL_S])
                for index in held))

        if task_ids:
            await self.store.per_shard(list(group_of), delete)

    async def aclose(self) -> None:
        await self.store.aclose()


async def standbys_on(store: Store, slot: int) -> dict[bytes, int]:
    """The actors node slot ``slot`` hosted that keep a standby, and the slot of each one's standby
    (what the head promotes when the slot's node fails)."""
    key = _standbys_key(slot)

    async def read(client: Client, _: list[bytes]) -> dict[bytes, int]:
        return {actor: int(standby) for actor, standby in (await client.hgetall(key)).items()}

    return (await store.per_shard([key], read))[0]
