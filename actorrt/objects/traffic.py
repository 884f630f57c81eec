"""Values whose buffers are in shared memory, as they leave for peers and arrive from them.

Out: the descriptor is lent to the peer (``objects/shared.py``). In: a value of this host is kept
like any, then the lease that came with it is accounted for (given back at once if its segment
cannot be opened); one of another host has its bytes pulled first (``objects/transfer.py``).
Peers tell their pid and host identity with every batch: when the stream of one of this host
ends, notices it sent may be lost with it, and if it died, it holds nothing any more. They also
tell which of their streams to this process a batch came on (``LostNotices``): that a stream
ended, and notices with it, shows in the data itself, however late the end is heard of, or not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from actorrt.net.peer_streams import PASSED, RELEASE
from actorrt.net.tls import TlsFiles
from actorrt.objects.fetches import Fetches
from actorrt.objects.shared import RegionKey, SharedObjects
from actorrt.objects.transfer import TransferError, TransferServer, pull
from actorrt.rpc import common_pb2 as pb
from actorrt.util.processes import process_alive

log = logging.getLogger(__name__)


class LostNotices:
    """Whether a same-host process may have sent this one notices that never came, judged from
    the batches themselves, before each is handled.

    A process stamps every batch with the serial of its stream to the receiver; a new stream (the
    old one ended, and whatever was queued on it may be lost) gets the next one. So a batch on
    another stream than the last one handled from that process, or a first batch from it on a
    stream after its first, may come after lost notices (a ``passed``): every segment made here
    and in use now is then never pooled again (``holder_lost``), before anything on the new
    stream, such as the release of the lease the lost notice was passed under, is counted. This
    does not wait for this process to hear that the stream ended: it may hear late (a half-open
    connection), or not at all (the peer's stream was not the one this process writes on). A new
    process at an address counts as a change too (the one before it may have died with notices
    lost, unheard of). Senders' addresses are the ones they serve at, as everywhere: a process
    named under two addresses would have two series of serials.
    """

    def __init__(self, shared: SharedObjects) -> None:
        self.shared = shared
        # peer address -> (its host identity, its pid, the serial last handled)
        self._last: dict[str, tuple[str, int, int]] = {}

    def heard(self, peer: str, host: str, pid: int, serial: int) -> None:
        """A batch from ``peer`` (process ``pid`` of ``host``, on its stream ``serial``) is about
        to be handled."""
        last = self._last.get(peer)
        self._last[peer] = (host, pid, serial)
        gap = serial > 1 if last is None else last[1:] != (pid, serial)
        if gap and host == self.shared.host:  # only a process of this host can pass segments made here on
            log.info("%s (pid %d) writes on a new stream: notices on its last one may be lost", peer, pid)
            self.shared.holder_lost(peer, dead=False)

    def process_of(self, peer: str) -> tuple[str, int] | None:
        """The host identity and pid of the process last heard from at ``peer``, if known."""
        last = self._last.get(peer)
        return last[:2] if last is not None and last[1] else None


class SharedTraffic:
    def __init__(self, shared: SharedObjects, token: str, send: Callable[[str, int, Any], None],
                 schedule: Callable[..., None], spawn: Callable[[Coroutine[Any, Any, Any]], Any], fetches: Fetches,
                 on_result: Callable[[pb.ObjectValue], None], tls: TlsFiles | None = None) -> None:
        self.shared = shared
        self.transfers = TransferServer(shared, token, tls)
        self._token = token
        self._tls = tls
        self._send = send
        self._schedule = schedule  # the loop's queue (call_soon_threadsafe), from any thread
        self._spawn = spawn
        self._fetches = fetches
        self._on_result = on_result
        self.lost_notices = LostNotices(shared)  # also who each peer is

    def lent(self, address: str, value: pb.ObjectValue) -> pb.ObjectValue:
        """``value`` as sent to ``address``: the descriptor of its shared buffers, lent (a process
        of this host maps them, one of another host pulls them)."""
        out = pb.ObjectValue()
        descriptor = self.shared.lend(value.value.shared, address)
        if descriptor is not None:
            out.CopyFrom(value)
            out.value.shared.CopyFrom(descriptor)
        else:
            out.CopyFrom(self.shared.materialize(value))
        return out

    def notify(self, address: str, kind: str, key: RegionKey, count: int, holder: str) -> None:
        """Tell a segment's creator that this process let it go, or passes it on. From any
        thread, always through the loop's queue: notices leave in the order they were made (a
        pass before the release of the lease it was passed under)."""
        region = pb.SharedRegion(creator_pid=key[0], inode=key[1], generation=key[2], count=count, holder=holder)
        try:
            self._schedule(self._send, address, RELEASE if kind == "release" else PASSED, region)
        except RuntimeError:  # the loop is closed: the process is going away, and its holds with it
            pass

    def heard_from(self, peer: str, host: str, pid: int, serial: int) -> None:
        """A batch from ``peer`` is about to be handled: notices before it may have been lost."""
        self.lost_notices.heard(peer, host, pid, serial)

    def peer_lost(self, address: str) -> None:
        peer = self.lost_notices.process_of(address)
        if peer is not None and peer[0] == self.shared.host:  # it may have passed this process's segments on
            self.shared.holder_lost(address, dead=not process_alive(peer[1]))

    def on_release(self, peer: str, region: pb.SharedRegion) -> None:
        self.shared.on_release(peer, (region.creator_pid, region.inode, region.generation), region.count)

    def on_passed(self, region: pb.SharedRegion) -> None:
        self.shared.on_passed((region.creator_pid, region.inode, region.generation), region.holder)

    def arrived(self, kind: str, value: pb.ObjectValue) -> None:
        """A ``result``, ``object`` or ``push`` whose buffers are in shared memory."""
        shared = value.value.shared
        if shared.host != self.shared.host:
            if kind == "push":
                self._fetches.expect_push(value.object_id)
            self._spawn(self._pull(kind, value))
            return
        if not self.shared.hold(shared):  # its process died before this one opened it: as if it never came
            self.shared.received(shared)
            self._not_arrived(kind, value, f"its process {shared.pid} is gone")
            return
        self._take(kind, value)
        self.shared.unhold(shared)
        self.shared.received(shared)

    def _not_arrived(self, kind: str, value: pb.ObjectValue, why: str) -> None:
        """A value whose bytes could not be had: a fetch asks again; an argument that came beside
        its task is fetched from its owner instead (a failed owner's replay makes it again); a
        result is left unanswered (the replay of its task's node sends it again)."""
        log.info("a %s could not be read (%s): it is asked for again", kind, why)
        if kind == "object":
            self._fetches.ask_again(value.object_id)
        elif kind == "push":
            self._fetches.fetch_instead(value.object_id, value.value.shared.creator)

    def _take(self, kind: str, value: pb.ObjectValue) -> None:
        if kind == "result":
            self._on_result(value)
        elif kind == "object":
            self._fetches.on_object(value)
        else:
            self._fetches.on_push(value)

    async def _pull(self, kind: str, value: pb.ObjectValue) -> None:
        remote = value.value.shared
        try:
            local = await pull(remote, self.shared, self._token, self._tls)
        except TransferError as exc:
            log.warning("%s", exc)
            self.shared.received(remote)
            self._not_arrived(kind, value, str(exc))
            return
        copy = pb.ObjectValue()
        copy.CopyFrom(value)
        copy.value.shared.CopyFrom(local)
        self._take(kind, copy)
        self.shared.received(remote)
        self.shared.settle_unheld(local)  # not kept (a duplicate): back to the pool

    async def aclose(self) -> None:
        await self.transfers.aclose()
        self.shared.close()
