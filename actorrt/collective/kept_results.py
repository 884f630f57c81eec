"""The results of collective calls a process keeps for its members' replays, and how it gives them.

Every process hosting members keeps each call's result in its object store, pinned until every
member's checkpoint covers the call. A replayed member asks the others once for every result they
keep from its next call on, and a late contribution to a call finished here is answered with the
result (or, if the members here went past it and keep it no more, with that it is missing): the
replay takes the results instead of running the calls again.
"""

from __future__ import annotations

from actorrt.collective.group import GroupMember, result_id
from actorrt.collective.members import CHANNEL, addresses, any_member, local_members
from actorrt.core import context
from actorrt.core.worker import Worker
from actorrt.rpc import collective_pb2 as cpb
from actorrt.rpc import common_pb2 as pb


class KeptResults:
    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self._prefetched: set[tuple[bytes, int]] = set()  # (group, rank) whose replay asked for results

    def keep(self, gid: bytes, seq: int, value: pb.ObjectValue) -> bool:
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
        member = any_member(self.worker, gid)
        for actor in member.members if member is not None else []:
            self.worker.retention.pin(oid, actor, gid, seq + 1)
        return True

    def answer_late(self, peer: str, message: cpb.CollectiveMessage) -> bool:
        """A contribution to a call this process finished: the result, if it is kept here; that it
        is missing, if its members went past it; else False (the call is still to come here)."""
        held = self.worker.objects.held(result_id(message.group_id, message.seq))
        if held is not None and held.WhichOneof("kind") == "value":
            reply = cpb.CollectiveMessage(group_id=message.group_id, seq=message.seq)
            reply.complete.CopyFrom(self._lent_value(held, peer))
            self.worker.channels.send(peer, CHANNEL, reply.SerializeToString())
            return True
        past = [m for m in local_members(self.worker, message.group_id) if m.calls > message.seq]
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

    def prefetch_if_replaying(self, member: GroupMember) -> bool:
        """A replayed member asks the others, once, for every result they keep from its next call
        on: its calls then take them from here, without a round trip each. Returns whether the
        running task is a replay."""
        task = context.running_task.get(None)
        if task is None or not task.replayed:
            return False
        if (member.gid, member.rank) in self._prefetched:
            return True
        self._prefetched.add((member.gid, member.rank))
        ask = cpb.CollectiveMessage(group_id=member.gid, seq=member.calls, rank=member.rank, replaying=True)
        for address in addresses(self.worker, member):
            if address != self.worker.address:
                self.worker.channels.send(address, CHANNEL, ask.SerializeToString())
        return True

    def send_kept(self, peer: str, gid: bytes, start: int) -> None:
        """Every result of the group this process keeps from call ``start`` on (up to the calls its
        members made), to a replaying member's process."""
        for seq in range(start, max((m.calls for m in local_members(self.worker, gid)), default=start)):
            held = self.worker.objects.held(result_id(gid, seq))
            if held is not None and held.WhichOneof("kind") == "value":
                reply = cpb.CollectiveMessage(group_id=gid, seq=seq)
                reply.complete.CopyFrom(self._lent_value(held, peer))
                self.worker.channels.send(peer, CHANNEL, reply.SerializeToString())

    def will_reach(self, gid: bytes, seq: int) -> bool:
        """Whether a member here has call ``seq`` still to make (a replaying one)."""
        members = local_members(self.worker, gid)
        return bool(members) and any(m.calls <= seq for m in members)
