"""The collective calls of one process: its members' calls, and the messages of the processes
hosting the other members (over the runtime's ``actorrt.collective`` channel).

A call (``Exchange`` says what it decides) goes: copy the input into shared memory and tell every
member's process (``contribution``); once every member has contributed, write this member's part
of the result straight into its host's segment (reading the inputs of its host's members where
they are, pulling its slice of the others' over TCP) and tell everyone (``done``); once every
member of the host is done, the result is complete: every process keeps it in its object store,
as an object, until every member's checkpoint covers the call (a replayed member fetches it from
there instead of running the call again), and its members get read-only arrays over the segment.
Within a host nothing is copied twice and nothing crosses a socket but descriptors.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
from collections import Counter
from typing import Any

import numpy as np

from actorrt.collective import ops
from actorrt.collective.exchange import Exchange
from actorrt.collective.group import EXTRAS_PREFIX, GroupMember, result_id
from actorrt.collective.memory import InputBuffers, PeerInputs, ResultParts
from actorrt.collective.ops import Op
from actorrt.core import context
from actorrt.core.worker import Worker
from actorrt.objects.shared import key_of
from actorrt.objects.transfer import pull, pull_range
from actorrt.rpc import collective_pb2 as cpb
from actorrt.rpc import common_pb2 as pb
from actorrt.rpc import head_pb2

log = logging.getLogger(__name__)

CHANNEL = "actorrt.collective"
# Parts of a result written on the event loop up to this size; larger ones in a thread (numpy
# lets go of the GIL), so the node keeps serving while it copies and adds.
INLINE_BYTES = 1 << 20


class CollectiveError(RuntimeError):
    """A collective call that cannot complete: the members' calls do not fit together, or a
    member is lost for good."""


class CollectiveService:
    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.host = worker.shared.host
        self.inputs = InputBuffers(self.host, worker.address, worker.shared.data_address)
        self.peers = PeerInputs(self.inputs)
        self.results = ResultParts(worker.shared.arena)
        self.exchanges: dict[tuple[bytes, int], Exchange] = {}
        self._finished: dict[tuple[bytes, int], asyncio.Future] = {}
        self._arrays: dict[tuple[bytes, int, int], np.ndarray] = {}  # what local members passed
        self._prefetched: set[tuple[bytes, int]] = set()  # (group, rank) whose replay asked for results
        self._pulling: set[tuple[bytes, int]] = set()  # results of another host's processes being copied here
        self._alive = self._alive_addresses()
        self.counts: Counter[str] = Counter()  # "computed", "fetched", "pulled_bytes": what tests and stats read
        worker.channels.register(CHANNEL, self._on_message)
        worker.traffic.transfers.also_serve(self.inputs.served)  # other hosts' members pull slices of inputs
        worker.membership.on_change(self._on_view)

    # ---- a member's call --------------------------------------------------------------------

    async def call(self, member: GroupMember, op: Op, array: np.ndarray | None) -> Any:
        """Run call ``member.calls`` of the group for this member; what it returns to it."""
        seq = member.calls
        self._went_past(member)
        self._prefetch_if_replaying(member)
        held = self.worker.objects.held(result_id(member.gid, seq))
        if held is not None and held.WhichOneof("kind") == "value":  # another member here finished it
            return self._returned(member, op, self._arrays_of(held))
        ex, finished = self._exchange(member, seq)
        contribution = cpb.Contribution(op=str(op), size=member.size, host=self.host)
        if array is not None:
            contribution.dtype, contribution.shape[:] = array.dtype.str, array.shape
            self._arrays[(member.gid, seq, member.rank)] = array
            if op.has_result:
                contribution.input.CopyFrom(await self._off_loop(array.nbytes, self.inputs.write, member.gid,
                                                                 member.rank, seq, array))
        if op.has_result and array is not None and self._leads_host(member, op, seq):
            contribution.result.CopyFrom(self._new_result(op, array.nbytes, member.size))
        ex.local[member.rank] = contribution
        ex.contribute(member.rank, contribution, self.worker.address)
        for address in self._addresses(member):
            self._tell(ex, address)
        self._progress(ex)
        try:
            arrays = await finished
        finally:
            self._arrays.pop((member.gid, seq, member.rank), None)
        return self._returned(member, op, arrays)

    def _returned(self, member: GroupMember, op: Op, arrays: list[np.ndarray] | None) -> Any:
        """What the call returns to ``member``; its result counts as kept for its replay."""
        if arrays is None:
            return None
        if self.worker.ft.logs_lineage:
            member.unchecked_bytes += sum(a.nbytes for a in arrays)
        return ops.result_value(op, arrays, member.rank, member.size)

    def _exchange(self, member: GroupMember, seq: int) -> tuple[Exchange, asyncio.Future]:
        """The call, and the future its local members await."""
        key = (member.gid, seq)
        ex = self.exchanges.get(key)
        if ex is None:
            ex = self.exchanges[key] = Exchange(member.gid, seq, member.size, self.host)
        finished = self._finished.get(key)
        if finished is None:
            finished = self._finished[key] = asyncio.get_running_loop().create_future()
        return ex, finished

    def _leads_host(self, member: GroupMember, op: Op, seq: int) -> bool:
        """Whether this member gives its host's result segment: the host's first member from the
        call's leader on, in turn, as this process's view places the members. If the view is out
        of date, a host may get two (the first counts) or none (made once every member came)."""
        for rank in [(op.leader(seq, member.size) + i) % member.size for i in range(member.size)]:
            info = self.worker.membership.serving(member.slots[rank])
            if rank == member.rank or (info is not None and info.host_id == self.host):
                return rank == member.rank
        return False

    def _new_result(self, op: Op, nbytes: int, size: int) -> pb.SharedObject:
        """A segment for the host's result, given by one of its members (held until the end)."""
        sizes = [nbytes] * size if op.kind == "allgather" else [nbytes]
        shared = self.worker.shared
        result = shared.placed(shared.reserve(sizes, populate=False), sizes)
        shared.hold(result)
        return result

    # ---- deciding ---------------------------------------------------------------------------

    def _progress(self, ex: Exchange) -> None:
        if ex.finished:
            return
        why = ex.mismatch()
        if why:
            self._fail(ex, ValueError(why))
            return
        if ex.cannot_finish():
            self._fail(ex, CollectiveError(
                f"call #{ex.seq} of collective group {self._name(ex.gid)!r} cannot be replayed: ranks "
                f"{sorted(ex.missing)} went past it and no process holds its result any more"))
            return
        if ex.result() is None and ex.op().has_result:
            self._lead_late(ex)
        for rank in list(ex.local):
            if ex.ready_to_write(rank):
                result = ex.result()
                ex.writing[rank] = key_of(result)
                self.worker.spawn(self._write_part(ex, rank, result))
        if ex.complete():
            self._complete(ex)

    def _lead_late(self, ex: Exchange) -> None:
        """Every member came and none gave this host's result segment (a view out of date placed
        them): the host's leader, if it is here, gives one now."""
        rank = ex.host_leader()
        if rank is None or rank not in ex.local:
            return
        leader = ex.contributions[ex.leader()]
        nbytes = int(np.prod(leader.shape, dtype=np.int64)) * np.dtype(leader.dtype).itemsize
        ex.local[rank].result.CopyFrom(self._new_result(ex.op(), nbytes, ex.size))
        ex.contribute(rank, ex.local[rank], self.worker.address)
        member = self._local_member(ex.gid, rank)
        for address in self._addresses(member) if member is not None else []:
            self._tell(ex, address)

    async def _write_part(self, ex: Exchange, rank: int, result: pb.SharedObject) -> None:
        op, key = ex.op(), key_of(result)
        try:
            await self._part(ex, op, rank, result)
        except OSError as exc:  # a process whose input it reads is gone: its member contributes again
            log.info("collective call #%d: an input is gone (%s); waiting for it again", ex.seq, exc)
            return
        finally:
            if ex.writing.get(rank) == key:
                del ex.writing[rank]
        if ex.finished or ex.result() is None or key_of(ex.result()) != key:
            return  # the result segment changed meanwhile: the part is written again into the new one
        ex.on_done(rank, result)  # here at once: nothing may write the part again once it counts
        self.counts["computed"] += 1
        done = cpb.CollectiveMessage(group_id=ex.gid, seq=ex.seq, rank=rank, done=cpb.Done(result=result))
        member = self._local_member(ex.gid, rank)
        for address in self._addresses(member) if member is not None else []:
            if address != self.worker.address:
                self.worker.channels.send(address, CHANNEL, done.SerializeToString())
        self._progress(ex)

    async def _part(self, ex: Exchange, op: Op, rank: int, result: pb.SharedObject) -> None:
        """Write member ``rank``'s part of its host's result: a slice of the elements for a
        reduction (of all inputs, in rank order), its own block and some of another host's
        members' for a gather, the whole for a broadcast (by the source, or the host's leader)."""
        ranks = ex.host_ranks()
        leader = ex.contributions[ex.leader()]
        dtype = np.dtype(leader.dtype) if leader.dtype else None
        if op.kind in ("allreduce", "reduce_scatter"):
            count = int(np.prod(leader.shape, dtype=np.int64))
            start, end = ops.element_slices(count, dtype.itemsize, len(ranks))[ranks.index(rank)]
            if start < end:
                inputs = await self._input_slices(ex, start * dtype.itemsize, (end - start) * dtype.itemsize)
                out = self.results.part(result, 0, start * dtype.itemsize, (end - start) * dtype.itemsize)
                await self._off_loop(len(out), ops.reduce_into, np.frombuffer(out, dtype),
                                     [np.frombuffer(i, dtype) for i in inputs], op.reduce)
        elif op.kind == "allgather":
            others = [r for r in range(ex.size) if r not in ranks]
            blocks = [rank] + [r for i, r in enumerate(others) if ranks[i % len(ranks)] == rank]
            for block in blocks:
                await self._copy_input(ex, block, self.results.part(result, block, 0, result.lengths[block]))
        elif op.kind == "broadcast" and rank == ex.result_rank():
            await self._copy_input(ex, op.src_rank, self.results.part(result, 0, 0, result.lengths[0]))

    async def _input_slices(self, ex: Exchange, start: int, nbytes: int) -> list[memoryview]:
        """Bytes ``start`` to ``start + nbytes`` of every member's input, in rank order: views of
        this host's, copies of the others' (pulled at once, each over its own connection)."""
        slices: list[memoryview] = []
        pulls = []
        for rank in range(ex.size):
            c = ex.contributions[rank]
            if c.host == self.host:
                slices.append(self.peers.view(c.input)[start:start + nbytes])
            else:
                slices.append(memoryview(bytearray(nbytes)))
                pulls.append(pull_range(c.input, start, slices[-1], self.worker.token))
        if pulls:
            await asyncio.gather(*pulls)
            self.counts["pulled_bytes"] += nbytes * len(pulls)
        return slices

    async def _copy_input(self, ex: Exchange, rank: int, out: memoryview) -> None:
        """Member ``rank``'s whole input into ``out``: from the array it passed, if here; from its
        buffer, on this host; pulled from its process, on another."""
        c = ex.contributions[rank]
        array = self._arrays.get((ex.gid, ex.seq, rank))
        if not out.nbytes:
            return
        if c.host != self.host:
            await pull_range(c.input, 0, out, self.worker.token)
            self.counts["pulled_bytes"] += out.nbytes
        elif array is not None:
            await self._off_loop(out.nbytes, np.copyto, np.ndarray(array.shape, array.dtype, buffer=out), array)
        else:
            await self._off_loop(out.nbytes, out.__setitem__, slice(None), self.peers.view(c.input))

    def _complete(self, ex: Exchange) -> None:
        op = ex.op()
        if not op.has_result:
            self._finish(ex, None)
            return
        leader = ex.contributions[ex.leader()]
        meta = pickle.dumps((str(op), leader.dtype, tuple(leader.shape)))
        self._finish(ex, pb.ObjectValue(object_id=result_id(ex.gid, ex.seq),
                                        value=pb.SerializedObject(data=meta, shared=ex.result())))

    def _finish(self, ex: Exchange, value: pb.ObjectValue | None) -> None:
        """The call is complete here: keep its result for the members' replays (when they are
        replayed), map it for the local members, and let the call's segments and leases go."""
        arrays = None
        if value is not None:
            arrays = self._take(ex, value)
            if arrays is None:
                self._result_gone(ex)
                return
        ex.outcome = value if value is not None else pb.ObjectValue()
        self._release(ex)
        future = self._finished.pop((ex.gid, ex.seq), None)
        if future is not None and not future.done():
            future.set_result(arrays)

    def _take(self, ex: Exchange, value: pb.ObjectValue) -> list[np.ndarray] | None:
        """The result's arrays, mapped here (and, when members are replayed, kept: ``_keep``);
        None if its segment is gone (its leader died before this process opened it)."""
        if self.worker.ft.logs_lineage and not self._keep(ex.gid, ex.seq, value):
            return None
        try:
            return self._arrays_of(value)
        except LookupError:
            return None

    def _result_gone(self, ex: Exchange) -> None:
        """The leader's process died with the result segment before this one opened it: its
        replay makes another, into which every member writes its part again; a leader that is
        not rebuilt fails the call."""
        leader = ex.result_rank()
        source = ex.sources.get(leader, "")
        ex.forget(leader)
        member = self._any_member(ex.gid)
        if member is not None and self._rank_lost(member.slots[leader], source, {source} - self._alive):
            self._fail(ex, CollectiveError(
                f"call #{ex.seq} of collective group {member.name!r} cannot complete: its leader, rank {leader}, "
                f"was lost with its node and the result with it (ft={self.worker.ft.mode.value!r})"))
            return
        self._progress(ex)

    def _keep(self, gid: bytes, seq: int, value: pb.ObjectValue) -> bool:
        """Put the result of call ``seq`` in this process's object store (which holds its
        segment), pinned until every member's checkpoint covers the call; False if the segment
        cannot be opened here."""
        shared = value.value.shared if value.value.HasField("shared") else None
        if shared is not None and not self.worker.shared.hold(shared):
            return False
        objects, oid = self.worker.objects, value.object_id
        if oid not in objects:
            objects.expect(oid)
            objects.put(value)
        if shared is not None:
            self.worker.shared.unhold(shared)  # the store holds it now
        member = self._any_member(gid)
        for actor in member.members if member is not None else []:
            self.worker.retention.pin(oid, actor, gid, seq + 1)
        return True

    def _fail(self, ex: Exchange, error: Exception) -> None:
        ex.error = str(error)
        self._release(ex)
        future = self._finished.pop((ex.gid, ex.seq), None)
        if future is not None and not future.done():
            future.set_exception(error)

    def _release(self, ex: Exchange) -> None:
        shared = self.worker.shared
        for contribution in ex.local.values():
            if contribution.HasField("result"):
                shared.unhold(contribution.result)  # the store holds it now, if it is the result
        for lent in ex.lent:
            shared.received(lent)
        ex.lent.clear()
        self.exchanges.pop((ex.gid, ex.seq), None)

    # ---- messages ---------------------------------------------------------------------------

    def _tell(self, ex: Exchange, address: str) -> None:
        """Send ``address`` this process's members' contributions and parts done for the call."""
        if address == self.worker.address:
            return
        ex.told.add(address)
        for rank, contribution in ex.local.items():
            message = cpb.CollectiveMessage(group_id=ex.gid, seq=ex.seq, rank=rank)
            message.contribution.CopyFrom(contribution)
            if contribution.HasField("result"):
                lent = self.worker.shared.lend(contribution.result, address)
                if lent is not None:
                    message.contribution.result.CopyFrom(lent)
            self.worker.channels.send(address, CHANNEL, message.SerializeToString())
            result = ex.result()
            if result is not None and ex.done.get(rank) == key_of(result):
                done = cpb.CollectiveMessage(group_id=ex.gid, seq=ex.seq, rank=rank, done=cpb.Done(result=result))
                self.worker.channels.send(address, CHANNEL, done.SerializeToString())

    def _on_message(self, peer: str, payload: bytes) -> None:
        try:
            message = cpb.CollectiveMessage.FromString(payload)
        except Exception:  # noqa: BLE001 - a malformed message from a peer is dropped, not fatal
            log.warning("dropped a malformed collective message from %s", peer)
            return
        kind = message.WhichOneof("kind")
        key = (message.group_id, message.seq)
        ex = self.exchanges.get(key)
        if kind == "contribution":
            self._on_contribution(peer, message, ex)
        elif kind == "done" and ex is not None:
            ex.on_done(message.rank, message.done.result)
            self._progress(ex)
        elif kind == "complete":
            self._on_complete(message, ex)
        elif kind == "missing" and ex is not None:
            ex.missing.add(message.rank)
            self._progress(ex)
        elif kind == "replaying":
            self._send_kept(peer, message.group_id, message.seq)

    def _on_contribution(self, peer: str, message: cpb.CollectiveMessage, ex: Exchange | None) -> None:
        c = message.contribution
        lent = c.HasField("result") and c.result.pid == c.result.creator_pid and c.result.creator_pid != os.getpid()
        if ex is None:
            if self._answer_late(peer, message):
                if lent:
                    self.worker.shared.received(c.result)
                return
            ex = self.exchanges[(message.group_id, message.seq)] = Exchange(message.group_id, message.seq, c.size,
                                                                            self.host)
        if lent:
            ex.lent.append(c.result)
        ex.contribute(message.rank, c, peer)
        if ex.local and peer not in ex.told:
            self._tell(ex, peer)
        self._progress(ex)

    def _answer_late(self, peer: str, message: cpb.CollectiveMessage) -> bool:
        """A contribution to a call this process finished: the result, if it is kept here; that it
        is missing, if its members went past it; else False (the call is still to come here)."""
        held = self.worker.objects.held(result_id(message.group_id, message.seq))
        if held is not None and held.WhichOneof("kind") == "value":
            reply = cpb.CollectiveMessage(group_id=message.group_id, seq=message.seq)
            reply.complete.CopyFrom(self._lent_value(held, peer))
            self.worker.channels.send(peer, CHANNEL, reply.SerializeToString())
            return True
        past = [m for m in self._local_members(message.group_id) if m.calls > message.seq]
        for m in past:
            reply = cpb.CollectiveMessage(group_id=message.group_id, seq=message.seq, rank=m.rank, missing=True)
            self.worker.channels.send(peer, CHANNEL, reply.SerializeToString())
        return bool(past)

    def _lent_value(self, value: pb.ObjectValue, address: str) -> pb.ObjectValue:
        if not value.value.HasField("shared"):
            return value  # spilled: its bytes travel
        lent = self.worker.shared.lend(value.value.shared, address)
        if lent is None:
            return self.worker.shared.materialize(value)
        out = pb.ObjectValue()
        out.CopyFrom(value)
        out.value.shared.CopyFrom(lent)
        return out

    def _on_complete(self, message: cpb.CollectiveMessage, ex: Exchange | None) -> None:
        """A result another process keeps: the call's outcome here, or one a replaying member
        here will reach (it asked for them all at once)."""
        value, key = message.complete, (message.group_id, message.seq)
        shared = value.value.shared if value.value.HasField("shared") else None
        if shared is not None and shared.host != self.host:  # another host's copy: pulled here first
            if key not in self._pulling and self._wants(key, ex):
                self._pulling.add(key)
                self.worker.spawn(self._pull_complete(key, value))
            else:
                self.worker.shared.received(shared)
            return
        self._take_complete(key, value)
        if shared is not None:
            self.worker.shared.received(shared)

    def _wants(self, key: tuple[bytes, int], ex: Exchange | None) -> bool:
        if ex is not None:
            return not ex.finished
        return result_id(*key) not in self.worker.objects and self._will_reach(*key)

    def _take_complete(self, key: tuple[bytes, int], value: pb.ObjectValue) -> None:
        ex = self.exchanges.get(key)
        if ex is not None and not ex.finished:
            self.counts["fetched"] += 1
            self._finish(ex, value)
        elif ex is None and self._wants(key, ex):
            if self._keep(*key, value):
                self.counts["fetched"] += 1

    async def _pull_complete(self, key: tuple[bytes, int], value: pb.ObjectValue) -> None:
        remote = value.value.shared
        try:
            local = await pull(remote, self.worker.shared, self.worker.token)
        except OSError as exc:  # its holder died meanwhile: another holder, or the exchange, gives it
            log.info("collective call #%d: could not copy its result from another host (%s)", key[1], exc)
            return
        finally:
            self._pulling.discard(key)
            self.worker.shared.received(remote)
        copy = pb.ObjectValue()
        copy.CopyFrom(value)
        copy.value.shared.CopyFrom(local)
        self._take_complete(key, copy)
        self.worker.shared.settle_unheld(local)  # not kept (the call finished meanwhile): back to the pool

    def _prefetch_if_replaying(self, member: GroupMember) -> None:
        """A replayed member asks the others, once, for every result they keep from its next call
        on: its calls then take them from here, without a round trip each."""
        task = context.running_task.get(None)
        if task is None or not task.replayed or (member.gid, member.rank) in self._prefetched:
            return
        self._prefetched.add((member.gid, member.rank))
        ask = cpb.CollectiveMessage(group_id=member.gid, seq=member.calls, rank=member.rank, replaying=True)
        for address in self._addresses(member):
            if address != self.worker.address:
                self.worker.channels.send(address, CHANNEL, ask.SerializeToString())

    def _send_kept(self, peer: str, gid: bytes, start: int) -> None:
        """Every result of the group this process keeps from call ``start`` on (up to the calls its
        members made), to a replaying member's process."""
        for seq in range(start, max((m.calls for m in self._local_members(gid)), default=start)):
            held = self.worker.objects.held(result_id(gid, seq))
            if held is not None and held.WhichOneof("kind") == "value":
                reply = cpb.CollectiveMessage(group_id=gid, seq=seq)
                reply.complete.CopyFrom(self._lent_value(held, peer))
                self.worker.channels.send(peer, CHANNEL, reply.SerializeToString())

    def _will_reach(self, gid: bytes, seq: int) -> bool:
        members = self._local_members(gid)
        return bool(members) and any(m.calls <= seq for m in members)

    # ---- members and processes --------------------------------------------------------------

    def _local_members(self, gid: bytes) -> list[GroupMember]:
        host = self.worker.host
        found = []
        for actor in host.actors.values() if host is not None else []:
            for name, extra in actor.context.extras.items():
                if name.startswith(EXTRAS_PREFIX) and isinstance(extra, GroupMember) and extra.gid == gid:
                    found.append(extra)
        return found

    def _name(self, gid: bytes) -> str:
        member = self._any_member(gid)
        return member.name if member is not None else gid.hex()[:12]

    def _local_member(self, gid: bytes, rank: int) -> GroupMember | None:
        return next((m for m in self._local_members(gid) if m.rank == rank), None)

    def _any_member(self, gid: bytes) -> GroupMember | None:
        found = self._local_members(gid)
        return found[0] if found else None

    def _addresses(self, member: GroupMember) -> list[str]:
        """The processes serving the group's members now (this one included), each once."""
        out: list[str] = []
        for slot in member.slots:
            info = self.worker.membership.serving(slot)
            if info is not None and info.state == head_pb2.ALIVE and info.address and info.address not in out:
                out.append(info.address)
        if self.worker.address not in out:
            out.append(self.worker.address)
        return out

    def _went_past(self, member: GroupMember) -> None:
        """Calls of the group before this member's next one that wait for it here: it made them
        before (it was restored past them), so they will not get its part from this process."""
        for (gid, seq), ex in list(self.exchanges.items()):
            if gid == member.gid and seq < member.calls and member.rank not in ex.local and not ex.finished:
                reply = cpb.CollectiveMessage(group_id=gid, seq=seq, rank=member.rank, missing=True)
                for address in set(ex.sources.values()) - {self.worker.address}:
                    self.worker.channels.send(address, CHANNEL, reply.SerializeToString())
                if not ex.local:
                    self._release(ex)

    def _alive_addresses(self) -> set[str]:
        return {n.address for n in self.worker.membership.alive_nodes() if n.address}

    def _on_view(self) -> None:
        alive = self._alive_addresses()
        gone, self._alive = self._alive - alive, alive
        if not gone:
            return
        for ex in list(self.exchanges.values()):
            for address in gone:
                ex.drop_from(address)
                ex.told.discard(address)
            member = self._any_member(ex.gid)
            if member is None or ex.finished:
                continue
            lost = [r for r, slot in enumerate(member.slots) if r not in ex.local and r not in ex.done
                    and self._rank_lost(slot, ex.sources.get(r), gone)]
            if lost:
                self._fail(ex, CollectiveError(
                    f"call #{ex.seq} of collective group {member.name!r} cannot complete: rank(s) {lost} were lost "
                    f"with their node and are not rebuilt (ft={self.worker.ft.mode.value!r})"))
                continue
            for address in self._addresses(member):  # a process that finished the call answers with its result
                self._tell(ex, address)
            self._progress(ex)

    def _rank_lost(self, slot: int, source: str | None, gone: set[str]) -> bool:
        """Whether a member on ``slot`` died for good: its slot has no future, or nothing rebuilds
        it (``ft="none"``; under global rollback every process starts again instead)."""
        ft = self.worker.ft
        if ft.rolls_back:
            return False
        if not self.worker.membership.accepts(slot):
            return True
        info = self.worker.membership.serving(slot)
        died = source in gone or info is None or info.state != head_pb2.ALIVE
        return died and not ft.logs_lineage

    # ---- values -----------------------------------------------------------------------------

    def _arrays_of(self, value: pb.ObjectValue) -> list[np.ndarray]:
        _, dtype, shape = pickle.loads(value.value.data)
        buffers = self.worker.shared.read(value.value.shared) if value.value.HasField("shared") \
            else [memoryview(b) for b in value.value.buffers]
        return [np.frombuffer(b, np.dtype(dtype)).reshape(shape) for b in buffers]

    async def _off_loop(self, nbytes: int, fn: Any, *args: Any) -> Any:
        if nbytes <= INLINE_BYTES:
            return fn(*args)
        return await asyncio.to_thread(fn, *args)


_services: dict[int, CollectiveService] = {}


def service(worker: Worker) -> CollectiveService:
    """This process's collective service (made at its first use)."""
    found = _services.get(id(worker))
    if found is None or found.worker is not worker:
        found = _services[id(worker)] = CollectiveService(worker)
    return found
