"""Large objects in shared memory: who holds which segment, and when it can be reused.

A value whose out-of-band buffers are large is written once into a segment of this process's
arena (``objects/arena.py``); only its descriptor (``pb.SharedObject``: the host, the process and
fd to open it through, which use of the segment) travels in messages. Every process that keeps
such a value (its object store, kept results) or reads it (a live mapping) *holds* the segment; a
process that keeps a value it did not create opens the segment at once and keeps the fd, so the
object survives its creator (a node that died still answers through its owner).

Leases. Every message that carries a descriptor to another process lends the receiver one lease
of the segment's creator, which the creator counts per address. The receiver gives its leases
back (``release``, with how many) once it holds the segment no more, at once for a message it
did not keep. The creator pools a segment again once nothing of its own holds it and no count is
above zero. It counts the leases it sends itself at once; a holder P that passes a descriptor on
to X tells the creator first (``passed``, naming X), on P's stream to it, then sends it, and the
creator counts that lease to X when the notice comes. X opens the segment through P (which holds
it meanwhile) and gives the lease back to the creator like any. X's release may come before P's
notice (other streams): a count may be below zero for a while.

Why no segment is pooled while a lease is out (its release has not reached the creator). A
process holds one region per use of a segment at a time and gives back all of its leases at once
when it goes; its notices leave in the order it made them, whatever the thread (``Notify``), and
a passer's notice is made while its region lives, so its stream to the creator carries the
notice before the release of the lease by which it holds the segment. Start from a
lease that is out. If it is not counted yet, its passer's notice is on the way, so the lease the
passer holds by (received before) is out too. If it is counted at X and X's count is not above
zero, some lease of X's was given back but not counted: X received it, in an earlier region,
before this one, and its passer's lease (received before that) is out. Each step reaches a lease
that is out and was received earlier: the steps end, at a count above zero.

Failures. That argument needs every notice to arrive. A stream that ends loses what was queued on
it from some point on (never a message before one that arrives); what its sender sends after
goes on a new stream, whose batches carry the next serial (``net/peer_streams.py``). Before a
creator handles anything a process of this host sent on another stream than the last one it
handled from that process (or, first, on one after its first, or from a new process at its
address), it marks every segment in use not to be pooled again, only closed once let go (the
kernel frees it with its last holder): ``holder_lost``, called by ``LostNotices``
(``objects/traffic.py``) from the serials alone, whether or when the creator hears the stream
end. Why that suffices: take the argument at the moment a use would be pooled. A step that
reaches a notice not counted finds it on its way or lost. If nothing of its passer's on a later
stream was handled since the notice was made, the passer's release, behind it on its stream or
on a later one, is not counted either: that lease is out, and the steps go on. Otherwise that
handling marked the use (in use then: not pooled before), and it is not pooled now. So a lost
notice costs reuse, never bytes. Also marked: in use when a stream of a process of this host is
heard to end or the process is declared dead (whose leases are then given back). A lost release
only delays reuse. A creator that died reuses nothing: holders keep their fds and tell nobody.
A creator never opens a descriptor of its own segment whose use is over here: pooled, the
segment keeps its fd and inode, and would show a later use's bytes. A process of another host
pulls the bytes instead of mapping them, and gives the lease back once it has them.

Reads map a segment read-only, so arrays come back read-only and zero-copy (as in Ray); a mapping
lives as long as some array or buffer made from it.
"""

from __future__ import annotations

import logging
import mmap
import os
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from actorrt.objects.arena import ALIGN, Arena, ArenaFullError, Segment
from actorrt.rpc import common_pb2 as pb
from actorrt.rpc import node_pb2 as pb_node

log = logging.getLogger(__name__)

RegionKey = tuple[int, int, int]  # (creator pid, segment inode, generation)
# Notices to a segment's creator, sent on the peer stream in the order they are made (under the
# lock): ``(creator address, kind, key, count, holder)``; "release" gives ``count`` leases back,
# "passed" lends one to ``holder``.
Notify = Callable[[str, str, RegionKey, int, str], None]


def key_of(shared: pb.SharedObject) -> RegionKey:
    return shared.creator_pid, shared.inode, shared.generation


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


@dataclass(eq=False)
class Region:
    """A segment as this process knows it: created here, or held from another process."""

    shared: pb.SharedObject  # how this process names it to others
    fd: int  # the segment, open here
    segment: Segment | None = None  # created here: the arena's
    holds: int = 0  # keepers here (store entries, kept results)
    mapping: weakref.ref | None = None  # a read mapping alive here
    # Created here: leases out, per address (below zero while a release beats its passer's notice).
    leases: dict[str, int] = field(default_factory=dict)
    received: int = 0  # held from another process: the creator's leases to give back when let go
    reusable: bool = True  # created here: False once a notice about it may have been lost

    @property
    def created_here(self) -> bool:
        return self.segment is not None

    def lease(self, address: str, count: int) -> None:
        self.leases[address] = self.leases.get(address, 0) + count

    def busy(self) -> bool:
        return (self.holds > 0 or (self.mapping is not None and self.mapping() is not None)
                or any(n > 0 for n in self.leases.values()))


class SharedObjects:
    """This process's view of shared segments. Thread-safe: drivers write from their callers'
    threads, and mappings die on whichever thread drops the last array."""

    def __init__(self, host: str, address: str, notify: Notify, arena: Arena | None = None) -> None:
        self.host = host
        self.address = address  # this process's serving address: where holders send releases
        self.pid = os.getpid()
        self.data_address = ""  # where this process answers pulls from other hosts, once it does
        self.arena = arena or Arena()
        self._notify = notify
        self._lock = threading.RLock()
        self._regions: dict[RegionKey, Region] = {}
        self.read_bytes = 0
        self.written_bytes = 0

    # ---- writing ------------------------------------------------------------------------------

    def write(self, buffers: list[memoryview]) -> pb.SharedObject | None:
        """Copy ``buffers`` (contiguous, as pickle hands them out) into a segment; its descriptor,
        or None when the host has no shared memory left (the caller sends them inline)."""
        sizes = [b.nbytes for b in buffers]
        try:
            segment = self.reserve(sizes)
        except ArenaFullError as exc:
            log.warning("%s: sending inline", exc)
            return None
        for buf, view in zip(buffers, self.views_of(segment, sizes), strict=True):
            view[:] = buf
        return self.placed(segment, sizes)

    def reserve(self, sizes: list[int], populate: bool = True) -> Segment:
        """A segment for buffers of ``sizes``, to fill (``views_of``) and then name (``placed``)."""
        return self.arena.allocate(sum(_aligned(n) for n in sizes), populate)

    @staticmethod
    def views_of(segment: Segment, sizes: list[int]) -> list[memoryview]:
        """Writable views of ``segment`` for buffers of ``sizes``, laid out as ``placed`` names them."""
        whole, out, offset = memoryview(segment.view), [], 0
        for n in sizes:
            out.append(whole[offset:offset + n])
            offset += _aligned(n)
        return out

    def placed(self, segment: Segment, sizes: list[int]) -> pb.SharedObject:
        """The descriptor of ``segment``, filled with buffers of ``sizes``; from now on it is lent and held."""
        offsets, offset = [], 0
        for n in sizes:
            offsets.append(offset)
            offset += _aligned(n)
        shared = pb.SharedObject(host=self.host, pid=self.pid, fd=segment.fd, inode=segment.inode,
                                 generation=segment.generation, creator=self.address, creator_pid=self.pid,
                                 offsets=offsets, lengths=sizes, data_address=self.data_address)
        with self._lock:
            self._regions[key_of(shared)] = Region(shared, segment.fd, segment)
            self.written_bytes += offset
        return shared

    def abandon(self, segment: Segment) -> None:
        """A reserved segment that will not be placed (a pull that failed)."""
        self.arena.recycle(segment)

    # ---- holding ------------------------------------------------------------------------------

    def hold(self, shared: pb.SharedObject) -> bool:
        """A keeper here took the value (its store, kept results). False if the segment cannot
        be had here any more (its holders closed it): the value is lost to this process."""
        key = key_of(shared)
        with self._lock:
            region = self._regions.get(key)
            if region is None:
                fd = self._open(shared)
                if fd is None:
                    return False
                region = self._regions[key] = Region(self._as_holder(shared, fd), fd)
            region.holds += 1
            return True

    def unhold(self, shared: pb.SharedObject) -> None:
        """A keeper here let the value go."""
        with self._lock:
            region = self._regions.get(key_of(shared))
            if region is not None:
                region.holds -= 1
                self._settle(key_of(shared), region)

    def kept(self, shared: pb.SharedObject, budget_bytes: int) -> None:
        """The value of ``shared`` is kept for replays (pinned): a segment made here gets a spare
        (``Arena.keep``)."""
        with self._lock:
            region = self._regions.get(key_of(shared))
            if region is None or not region.created_here:
                return
        self.arena.keep(region.segment, budget_bytes)

    def lend(self, shared: pb.SharedObject, address: str) -> pb.SharedObject | None:
        """``shared`` is about to be sent to ``address``: the descriptor to send, with a lease of
        its creator's (counted here, or told to its creator first). None if this process has it
        no more (the caller sends the bytes, or nothing)."""
        key = key_of(shared)
        with self._lock:  # no release of this region's can be made before the notice
            region = self._regions.get(key)
            if region is None:
                return None
            if region.created_here:
                region.lease(address, 1)
            elif address != shared.creator:  # the creator's own holds count there at once
                self._notify(shared.creator, "passed", key, 1, address)
            return region.shared

    def lent_with(self, shared: pb.SharedObject) -> bool:
        """Whether a message from another process carrying ``shared`` came with a lease to give
        back: any descriptor of a segment made elsewhere."""
        return shared.creator != self.address

    def received(self, shared: pb.SharedObject) -> None:
        """A message carrying ``shared`` was handled (its value kept here, or not, or not to be
        had). The lease that came with it goes back when the last holder here lets go, or now if
        none holds it."""
        if not self.lent_with(shared):
            return
        key = key_of(shared)
        with self._lock:
            region = self._regions.get(key)
            if region is not None:
                region.received += 1
            else:
                self._notify(shared.creator, "release", key, 1, "")

    def settle_unheld(self, shared: pb.SharedObject) -> None:
        """``shared`` was made here for a keeper that did not take it: free it if nothing holds it."""
        key = key_of(shared)
        with self._lock:
            region = self._regions.get(key)
            if region is not None:
                self._settle(key, region)

    def on_release(self, address: str, key: RegionKey, count: int) -> None:
        """``address`` gives back ``count`` of the leases of a segment made here (late ones, for
        a use that is over, find no region)."""
        with self._lock:
            region = self._regions.get(key)
            if region is not None and region.created_here:
                region.lease(address, -count)
                self._settle(key, region)

    def on_passed(self, key: RegionKey, holder: str) -> None:
        """A holder passed a segment made here on to ``holder``: a lease to it."""
        with self._lock:
            region = self._regions.get(key)
            if region is not None and region.created_here:
                region.lease(holder, 1)  # busier, or back to zero after a release that came first

    def holder_lost(self, address: str, dead: bool) -> None:
        """The stream from ``address`` ended, or a batch of its came on a new one, or it was
        declared dead: notices it queued may be lost, so no segment in use now is pooled again. If
        it is dead, what it held is free."""
        with self._lock:
            for key, region in list(self._regions.items()):
                if region.created_here:
                    region.reusable = False
                    if dead:
                        region.leases.pop(address, None)
                        self._settle(key, region)

    def _settle(self, key: RegionKey, region: Region) -> None:
        if region.busy():
            return
        del self._regions[key]
        if region.created_here:
            if region.reusable:
                self.arena.recycle(region.segment)
            else:
                self.arena.discard(region.segment)
        else:
            os.close(region.fd)
            if region.received:
                self._notify(region.shared.creator, "release", key, region.received, "")

    # ---- reading ------------------------------------------------------------------------------

    def read(self, shared: pb.SharedObject) -> list[memoryview]:
        """Read-only views of the buffers of ``shared``, without copying. The mapping lives as
        long as any of them (or anything built on them).

        Raises:
            LookupError: the segment cannot be had here (it is neither held nor openable).
        """
        key = key_of(shared)
        with self._lock:
            region = self._regions.get(key)
            mapped = region.mapping() if region is not None and region.mapping is not None else None
            if mapped is None:
                fd = region.fd if region is not None else self._open(shared)
                if fd is None:
                    raise LookupError(f"shared object {key} is gone")
                size = max(o + n for o, n in zip(shared.offsets, shared.lengths, strict=True)) if shared.lengths else 1
                # Not populated: a reader pays for the pages it touches (a task that looks at part
                # of a large input maps it in microseconds), and they are in memory already.
                mapped = mmap.mmap(fd, -(-size // mmap.PAGESIZE) * mmap.PAGESIZE, flags=mmap.MAP_SHARED,
                                   prot=mmap.PROT_READ)
                if region is None:  # read without keeping (a value passing through): the mapping holds it
                    region = self._regions[key] = Region(self._as_holder(shared, fd), fd)
                region.mapping = weakref.ref(mapped)
                weakref.finalize(mapped, self._unmapped, key).atexit = False  # at exit, nobody is told
                self.read_bytes += size
        whole = memoryview(mapped)
        return [whole[o:o + n].toreadonly() for o, n in zip(shared.offsets, shared.lengths, strict=True)]

    def materialize(self, value: pb.ObjectValue) -> pb.ObjectValue:
        """``value`` with its buffers' bytes inline: for what outlives this host's memory (a spill
        or checkpoint file) or goes to another host."""
        if value.WhichOneof("kind") != "value" or not value.value.HasField("shared"):
            return value
        buffers = [bytes(b) for b in self.read(value.value.shared)]
        return pb.ObjectValue(object_id=value.object_id,
                              value=pb.SerializedObject(data=value.value.data, buffers=buffers))

    def _unmapped(self, key: RegionKey) -> None:
        with self._lock:
            region = self._regions.get(key)
            if region is not None and region.mapping is not None and region.mapping() is None:
                region.mapping = None
                self._settle(key, region)

    # ---- opening ------------------------------------------------------------------------------

    def _open(self, shared: pb.SharedObject) -> int | None:
        """Open the segment through the process the descriptor names; None if it is gone there,
        or if it was made here and its use is over (called for a key with no region here): a pooled
        segment keeps its fd and inode, so it would open, with a later use's bytes."""
        if shared.creator == self.address and shared.creator_pid == self.pid:
            return None
        try:
            fd = os.open(f"/proc/{shared.pid}/fd/{shared.fd}", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        if os.fstat(fd).st_ino != shared.inode:  # that fd is another file now
            os.close(fd)
            return None
        return fd

    def _as_holder(self, shared: pb.SharedObject, fd: int) -> pb.SharedObject:
        """The descriptor naming this process as the one to open it through."""
        own = pb.SharedObject()
        own.CopyFrom(shared)
        own.pid, own.fd, own.data_address = self.pid, fd, self.data_address
        return own

    # ---- life ---------------------------------------------------------------------------------

    def stats(self) -> pb_node.SharedMemory:
        with self._lock:
            held = [r for r in self._regions.values() if not r.created_here]
            return pb_node.SharedMemory(**self.arena.stats(), held_from_others=len(held),
                                        written_bytes=self.written_bytes, read_bytes=self.read_bytes,
                                        lent=sum(n for r in self._regions.values() for n in r.leases.values() if n > 0))

    def close(self) -> None:
        with self._lock:
            for region in self._regions.values():
                if not region.created_here:
                    os.close(region.fd)
            self._regions.clear()
        self.arena.close()
