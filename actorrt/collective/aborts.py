"""Collective calls that time out: who decides to abort one, and how every member hears of it.

A member whose call waited past its timeout asks the process hosting rank 0 to abort the call.
That process decides alone (``exchange.py`` says why one decider keeps members in step): it aborts
only while it lacks some member's contribution, only while no member is being rebuilt (a recovery
is not a member that did not call), and never once it had them all. The abort goes to every
member's process, which keeps it (the last ``ABORTS_KEPT``) to answer late contributions and
replaying members; each member also records it in its log (``api.py``).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable

from actorrt.collective import members
from actorrt.collective.exchange import Exchange
from actorrt.collective.group import GroupMember
from actorrt.core.worker import Worker
from actorrt.rpc import collective_pb2 as cpb
from actorrt.rpc import head_pb2

log = logging.getLogger(__name__)
# Aborted calls remembered per process, for members that make them late (or again, replayed).
ABORTS_KEPT = 4096

Key = tuple[bytes, int]  # (group, call)


class Aborts:
    def __init__(self, worker: Worker, exchanges: dict[Key, Exchange],
                 fail: Callable[[Exchange, str], None]) -> None:
        self.worker = worker
        self._exchanges = exchanges  # the calls under way here
        self._fail = fail  # fails a call under way here with the abort's reason
        self._aborted: OrderedDict[Key, cpb.Aborted] = OrderedDict()

    def reason(self, gid: bytes, seq: int) -> str | None:
        """Why call ``seq`` of group ``gid`` was aborted, if it was (as this process heard)."""
        aborted = self._aborted.get((gid, seq))
        return aborted.reason if aborted is not None else None

    def ask(self, member: GroupMember, seq: int, timeout: float) -> None:
        """``member`` waited ``timeout`` s in call ``seq``: ask rank 0's process to abort it."""
        request = cpb.CollectiveMessage(group_id=member.gid, seq=seq, rank=member.rank,
                                        abort=cpb.AbortRequest(timeout_s=timeout))
        info = self.worker.membership.serving(member.slots[0])
        if info is None or info.state != head_pb2.ALIVE or not info.address:
            return  # rank 0's process restarts: asked again after the next timeout
        if info.address == self.worker.address:
            self.on_request(self.worker.address, request)
        else:
            self.worker.channels.send(info.address, members.CHANNEL, request.SerializeToString())

    def on_request(self, peer: str, message: cpb.CollectiveMessage) -> None:
        key = (message.group_id, message.seq)
        if key in self._aborted:  # decided already: the asker missed it (its process restarted)
            self._send(peer, key)
            return
        ex = self._exchanges.get(key)
        member = members.any_member(self.worker, message.group_id)
        if ex is None or ex.finished or ex.decided or not ex.lacks() or member is None:
            return  # it completes (or has): the asker hears so as every member does
        if not self._may_abort(member):
            return  # a member is being rebuilt: a recovery is no reason to abort (asked again later)
        self._keep(key, cpb.Aborted(reason=(
            f"collective call #{ex.seq} ({ex.op()}) of group {member.name!r} timed out after "
            f"{message.abort.timeout_s:g} s: rank(s) {ex.lacks()} did not call it. It fails on every member, also "
            f"on those that call it late; the group's next call is #{ex.seq + 1}")))
        for address in {*members.addresses(self.worker, member), *ex.sources.values(), peer}:
            self._send(address, key)
        self._abort(ex, key)

    def on_aborted(self, message: cpb.CollectiveMessage) -> None:
        key = (message.group_id, message.seq)
        self._keep(key, message.aborted)
        ex = self._exchanges.get(key)
        if ex is not None and not ex.finished:
            self._abort(ex, key)

    def answer_late(self, peer: str, key: Key) -> bool:
        """A contribution to call ``key`` came after it was aborted: the abort goes back."""
        if key not in self._aborted:
            return False
        self._send(peer, key)
        return True

    def send_from(self, peer: str, gid: bytes, start: int) -> None:
        """Every abort of group ``gid`` from call ``start`` on, to a replaying member's process."""
        for key in [k for k in self._aborted if k[0] == gid and k[1] >= start]:
            self._send(peer, key)

    def _may_abort(self, member: GroupMember) -> bool:
        """Whether this process may abort a call now: it hosts rank 0 and holds its lease, and no
        member is being rebuilt (its slot restarting, or replaying here). A member lost for good
        is no reason to wait."""
        if not self.worker.lease.valid() or members.local_member(self.worker, member.gid, 0) is None:
            return False
        for slot in member.slots:
            info = self.worker.membership.serving(slot)
            alive = info is not None and info.state == head_pb2.ALIVE
            if not alive and not members.rank_lost(self.worker, slot, None, set()):
                return False
        return not any(actor.replaying or actor.replay
                       for actor in (self.worker.host.actors.values() if self.worker.host is not None else ())
                       if actor.actor_id in member.members)

    def _keep(self, key: Key, aborted: cpb.Aborted) -> None:
        self._aborted[key] = aborted
        while len(self._aborted) > ABORTS_KEPT:
            self._aborted.popitem(last=False)

    def _send(self, address: str, key: Key) -> None:
        if address != self.worker.address:
            message = cpb.CollectiveMessage(group_id=key[0], seq=key[1], aborted=self._aborted[key])
            self.worker.channels.send(address, members.CHANNEL, message.SerializeToString())

    def _abort(self, ex: Exchange, key: Key) -> None:
        reason = self._aborted[key].reason
        log.warning("%s", reason)
        self._fail(ex, reason)
