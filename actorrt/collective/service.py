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

This module decides and tells; the bytes (writing parts, pulling other hosts' inputs and results)
are ``parts.py``'s, the results kept for replays ``kept_results.py``'s, and where the members are
``members.py``'s.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
from collections import Counter
from typing import Any

import numpy as np

from actorrt.collective import members, ops
from actorrt.collective.aborts import Aborts
from actorrt.collective.exchange import Exchange
from actorrt.collective.group import GroupMember, result_id
from actorrt.collective.kept_results import KeptResults
from actorrt.collective.memory import InputBuffers
from actorrt.collective.ops import Op
from actorrt.collective.parts import PartWriter, off_loop
from actorrt.core.worker import Worker
from actorrt.objects.shared import key_of
from actorrt.rpc import collective_pb2 as cpb
from actorrt.rpc import common_pb2 as pb

log = logging.getLogger(__name__)


class CollectiveError(RuntimeError):
    """A collective call that cannot complete: the members' calls do not fit together, a member
    is lost for good, or some member did not call it within the timeout."""


class CallAborted(CollectiveError):  # noqa: N818 - a CollectiveError, named for what happened
    """The call was aborted: some member had not made it within the timeout."""


class CollectiveService:
    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.host = worker.shared.host
        self.inputs = InputBuffers(self.host, worker.address, worker.shared.data_address)
        self.exchanges: dict[tuple[bytes, int], Exchange] = {}
        self._finished: dict[tuple[bytes, int], asyncio.Future] = {}
        self._pulling: set[tuple[bytes, int]] = set()  # results of another host's processes being copied here
        self.aborts = Aborts(worker, self.exchanges, lambda ex, reason: self._fail(ex, CallAborted(reason)))
        self._alive = members.alive_addresses(worker)
        self.counts: Counter[str] = Counter()  # "computed", "fetched", "pulled_bytes": what tests and stats read
        self.parts = PartWriter(worker, self.inputs, self.counts)
        self.kept = KeptResults(worker)
        worker.channels.register(members.CHANNEL, self._on_message)
        worker.traffic.transfers.also_serve(self.inputs.served)  # other hosts' members pull slices of inputs
        worker.membership.on_change(self._on_view)

    # ---- a member's call --------------------------------------------------------------------

    async def call(self, member: GroupMember, op: Op, array: np.ndarray | None, timeout: float | None) -> Any:
        """Run call ``member.calls`` of the group for this member; what it returns to it. Past
        ``timeout`` seconds (not in a replay, which has the first run's outcomes), it asks rank 0's
        process to abort the call, and goes on asking while it waits."""
        seq = member.calls
        self._went_past(member)
        replaying = self.kept.prefetch_if_replaying(member)
        aborted = self.aborts.reason(member.gid, seq)
        if aborted is not None:
            raise CallAborted(aborted)
        held = self.worker.objects.held(result_id(member.gid, seq))
        if held is not None and held.WhichOneof("kind") == "value":  # another member here finished it
            return self._returned(member, op, self._arrays_of(held))
        ex, finished = self._exchange(member, seq)
        contribution = cpb.Contribution(op=str(op), size=member.size, host=self.host)
        if array is not None:
            contribution.dtype, contribution.shape[:] = array.dtype.str, array.shape
            self.parts.arrays[(member.gid, seq, member.rank)] = array
            if op.has_result:
                contribution.input.CopyFrom(await off_loop(array.nbytes, self.inputs.write, member.gid,
                                                           member.rank, seq, array))
        if op.has_result and array is not None and members.leads_host(self.worker, member, op, seq):
            contribution.result.CopyFrom(self.parts.new_result(op, array.nbytes, member.size))
        ex.local[member.rank] = contribution
        ex.contribute(member.rank, contribution, self.worker.address)
        for address in members.addresses(self.worker, member):
            self._tell(ex, address)
        self._progress(ex)
        try:
            while timeout is not None and not replaying:
                try:
                    arrays = await asyncio.wait_for(asyncio.shield(finished), timeout)
                    break
                except TimeoutError:
                    self.aborts.ask(member, seq, timeout)
            else:
                arrays = await asyncio.shield(finished)  # shared by this process's members: one's cancel is not theirs
        finally:
            self.parts.arrays.pop((member.gid, seq, member.rank), None)
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

    # ---- deciding ---------------------------------------------------------------------------

    def _progress(self, ex: Exchange) -> None:
        if ex.finished:
            return
        if 0 in ex.local and not ex.lacks() and not ex.decided:
            self._decided(ex)
        why = ex.mismatch()
        if why:
            self._fail(ex, ValueError(why))
            return
        if ex.cannot_finish():
            self._fail(ex, CollectiveError(
                f"call #{ex.seq} of collective group {members.group_name(self.worker, ex.gid)!r} cannot be "
                f"replayed: ranks {sorted(ex.missing)} went past it and no process holds its result any more"))
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

    def _decided(self, ex: Exchange) -> None:
        """This process serves rank 0 and has every contribution: the call will not be aborted.
        A barrier writes no part, so its ``done`` for rank 0 is sent now to say so."""
        ex.decided = True
        if ex.op().has_result:
            return
        done = cpb.CollectiveMessage(group_id=ex.gid, seq=ex.seq, rank=0, done=cpb.Done())
        for address in set(ex.sources.values()) - {self.worker.address}:
            self.worker.channels.send(address, members.CHANNEL, done.SerializeToString())

    def _lead_late(self, ex: Exchange) -> None:
        """Every member came and none gave this host's result segment (a view out of date placed
        them): the host's leader, if it is here, gives one now."""
        rank = ex.host_leader()
        if rank is None or rank not in ex.local:
            return
        leader = ex.contributions[ex.leader()]
        nbytes = int(np.prod(leader.shape, dtype=np.int64)) * np.dtype(leader.dtype).itemsize
        ex.local[rank].result.CopyFrom(self.parts.new_result(ex.op(), nbytes, ex.size))
        ex.contribute(rank, ex.local[rank], self.worker.address)
        member = members.local_member(self.worker, ex.gid, rank)
        for address in members.addresses(self.worker, member) if member is not None else []:
            self._tell(ex, address)

    async def _write_part(self, ex: Exchange, rank: int, result: pb.SharedObject) -> None:
        op, key = ex.op(), key_of(result)
        try:
            await self.parts.write(ex, op, rank, result)
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
        member = members.local_member(self.worker, ex.gid, rank)
        for address in members.addresses(self.worker, member) if member is not None else []:
            if address != self.worker.address:
                self.worker.channels.send(address, members.CHANNEL, done.SerializeToString())
        self._progress(ex)

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
        """The result's arrays, mapped here (and, when members are replayed, kept: ``KeptResults.keep``);
        None if its segment is gone (its leader died before this process opened it)."""
        if self.worker.ft.logs_lineage and not self.kept.keep(ex.gid, ex.seq, value):
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
        member = members.any_member(self.worker, ex.gid)
        if member is not None and members.rank_lost(self.worker, member.slots[leader], source, {source} - self._alive):
            self._fail(ex, CollectiveError(
                f"call #{ex.seq} of collective group {member.name!r} cannot complete: its leader, rank {leader}, "
                f"was lost with its node and the result with it (ft={self.worker.ft.mode.value!r})"))
            return
        self._progress(ex)

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
                else:  # its use is over here: without a lease it may be pooled, and reused, under the peer
                    message.contribution.ClearField("result")
            self.worker.channels.send(address, members.CHANNEL, message.SerializeToString())
            result = ex.result()
            if result is not None and ex.done.get(rank) == key_of(result):
                done = cpb.CollectiveMessage(group_id=ex.gid, seq=ex.seq, rank=rank, done=cpb.Done(result=result))
                self.worker.channels.send(address, members.CHANNEL, done.SerializeToString())

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
            self.kept.send_kept(peer, message.group_id, message.seq)
            self.aborts.send_from(peer, message.group_id, message.seq)
        elif kind == "abort":
            self.aborts.on_request(peer, message)
        elif kind == "aborted":
            self.aborts.on_aborted(message)

    def _on_contribution(self, peer: str, message: cpb.CollectiveMessage, ex: Exchange | None) -> None:
        c = message.contribution
        lent = c.HasField("result") and self.worker.shared.lent_with(c.result)
        if ex is None:
            if self.aborts.answer_late(peer, (message.group_id, message.seq)) or self.kept.answer_late(peer, message):
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
        return result_id(*key) not in self.worker.objects and self.kept.will_reach(*key)

    def _take_complete(self, key: tuple[bytes, int], value: pb.ObjectValue) -> None:
        ex = self.exchanges.get(key)
        if ex is not None and not ex.finished:
            self.counts["fetched"] += 1
            self._finish(ex, value)
        elif ex is None and self._wants(key, ex):
            if self.kept.keep(*key, value):
                self.counts["fetched"] += 1

    async def _pull_complete(self, key: tuple[bytes, int], value: pb.ObjectValue) -> None:
        try:
            copy = await self.parts.pull_result(value)
        except OSError as exc:  # its holder died meanwhile: another holder, or the exchange, gives it
            log.info("collective call #%d: could not copy its result from another host (%s)", key[1], exc)
            return
        finally:
            self._pulling.discard(key)
        self._take_complete(key, copy)
        self.worker.shared.settle_unheld(copy.value.shared)  # not kept (the call finished meanwhile): back to the pool

    # ---- members and processes --------------------------------------------------------------

    def _went_past(self, member: GroupMember) -> None:
        """Calls of the group before this member's next one that wait for it here: it made them
        before (it was restored past them), so they will not get its part from this process."""
        for (gid, seq), ex in list(self.exchanges.items()):
            if gid == member.gid and seq < member.calls and member.rank not in ex.local and not ex.finished:
                reply = cpb.CollectiveMessage(group_id=gid, seq=seq, rank=member.rank, missing=True)
                for address in set(ex.sources.values()) - {self.worker.address}:
                    self.worker.channels.send(address, members.CHANNEL, reply.SerializeToString())
                if not ex.local:
                    self._release(ex)

    def _on_view(self) -> None:
        alive = members.alive_addresses(self.worker)
        gone, self._alive = self._alive - alive, alive
        if not gone:
            return
        for ex in list(self.exchanges.values()):
            for address in gone:
                ex.drop_from(address)
                ex.told.discard(address)
            member = members.any_member(self.worker, ex.gid)
            if member is None or ex.finished:
                continue
            lost = [r for r, slot in enumerate(member.slots) if r not in ex.local and r not in ex.done
                    and members.rank_lost(self.worker, slot, ex.sources.get(r), gone)]
            if lost:
                self._fail(ex, CollectiveError(
                    f"call #{ex.seq} of collective group {member.name!r} cannot complete: rank(s) {lost} were lost "
                    f"with their node and are not rebuilt (ft={self.worker.ft.mode.value!r})"))
                continue
            # A process that finished the call answers with its result.
            for address in members.addresses(self.worker, member):
                self._tell(ex, address)
            self._progress(ex)

    # ---- values -----------------------------------------------------------------------------

    def _arrays_of(self, value: pb.ObjectValue) -> list[np.ndarray]:
        _, dtype, shape = pickle.loads(value.value.data)
        buffers = self.worker.shared.read(value.value.shared) if value.value.HasField("shared") \
            else [memoryview(b) for b in value.value.buffers]
        return [np.frombuffer(b, np.dtype(dtype)).reshape(shape) for b in buffers]


_services: dict[int, CollectiveService] = {}


def service(worker: Worker) -> CollectiveService:
    """This process's collective service (made at its first use)."""
    found = _services.get(id(worker))
    if found is None or found.worker is not worker:
        found = _services[id(worker)] = CollectiveService(worker)
    return found
