"""The shared memory of collective calls: members' input buffers, and mappings of other processes'.

A member's input is copied into a buffer of its own, in its process's shared memory, and the other
members read their slices of it from there. Two buffers per member and group, used in turn: call
``seq`` writes buffer ``seq % 2``, which is written again only by call ``seq + 2``, and no member
gets there before every member finished call ``seq + 1``, hence finished reading call ``seq``.
Buffers are kept between calls, and so are the mappings of them in the other processes: after the
first call no page is faulted in again (as gloo and NCCL register their buffers once).
"""

from __future__ import annotations

import mmap
import os
from collections import OrderedDict

import numpy as np

from actorrt.objects.arena import Arena, Segment
from actorrt.rpc import common_pb2 as pb


def map_segment(shared: pb.SharedObject, writable: bool) -> mmap.mmap:
    """The whole segment ``shared`` names, mapped here through its process.

    Raises:
        OSError: that process is gone, or holds another file under that fd now.
    """
    fd = os.open(f"/proc/{shared.pid}/fd/{shared.fd}", (os.O_RDWR if writable else os.O_RDONLY) | os.O_CLOEXEC)
    try:
        if os.fstat(fd).st_ino != shared.inode:
            raise FileNotFoundError(f"process {shared.pid} holds another file under fd {shared.fd} now")
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
        return mmap.mmap(fd, os.fstat(fd).st_size, flags=mmap.MAP_SHARED, prot=prot)
    finally:
        os.close(fd)


class InputBuffers:
    """This process's members' input buffers, per (group, rank), two each."""

    def __init__(self, host: str, address: str, data_address: str) -> None:
        self._host = host
        self._address = address
        self._data_address = data_address  # where processes of other hosts pull slices of them
        self._arena = Arena(pool_bytes=0)  # never pooled: a buffer is kept until a larger one replaces it
        self._buffers: dict[tuple[bytes, int, int], Segment] = {}

    def write(self, gid: bytes, rank: int, seq: int, array: np.ndarray) -> pb.SharedObject:
        """Copy ``array`` into the member's buffer for call ``seq``; its descriptor."""
        key = (gid, rank, seq % 2)
        segment = self._buffers.get(key)
        if segment is None or segment.size < array.nbytes:
            if segment is not None:
                self._arena.discard(segment)  # readers' mappings keep it alive until they let go
            segment = self._buffers[key] = self._arena.allocate(array.nbytes)
        np.copyto(np.ndarray(array.shape, array.dtype, buffer=segment.view), array, casting="no")
        pid = os.getpid()
        return pb.SharedObject(host=self._host, pid=pid, fd=segment.fd, inode=segment.inode, creator=self._address,
                               creator_pid=pid, offsets=[0], lengths=[array.nbytes],
                               data_address=self._data_address)

    def local(self, shared: pb.SharedObject) -> memoryview | None:
        """The buffer ``shared`` names, if this process made it."""
        segment = self._arena.segment(shared.fd)
        return memoryview(segment.view) if segment is not None and segment.inode == shared.inode else None

    def served(self, shared: pb.SharedObject) -> memoryview | None:
        """The input ``shared`` names, for a pull from another host; None if it is not this process's."""
        local = self.local(shared) if shared.pid == os.getpid() else None
        return local[:shared.lengths[0]] if local is not None and shared.lengths else None


class Mappings:
    """Mappings of other processes' segments, kept from call to call: a buffer or a recycled
    result segment maps once, and later calls touch its pages without a fault. The least recently
    used go past ``max_bytes`` (a mapping keeps its segment alive after its maker let go of it,
    or died)."""

    def __init__(self, writable: bool, max_bytes: int = 1 << 30) -> None:
        self._writable = writable
        self._max_bytes = max_bytes
        self._maps: OrderedDict[tuple[int, int, int], mmap.mmap] = OrderedDict()
        self._bytes = 0

    def get(self, shared: pb.SharedObject) -> mmap.mmap:
        """The whole segment ``shared`` names.

        Raises:
            OSError: its process is gone, and the segment with it (unless mapped here before).
        """
        key = (shared.pid, shared.fd, shared.inode)
        mapped = self._maps.get(key)
        if mapped is None:
            mapped = self._maps[key] = map_segment(shared, self._writable)
            self._bytes += len(mapped)
            while self._bytes > self._max_bytes and len(self._maps) > 1:
                _, old = self._maps.popitem(last=False)
                self._bytes -= len(old)
                try:
                    old.close()
                except BufferError:  # still read or written: the mapping goes with the last view of it
                    pass
        self._maps.move_to_end(key)
        return mapped


class PeerInputs:
    """The members' inputs, read where they are: this process's buffers, or mapped read-only."""

    def __init__(self, own: InputBuffers) -> None:
        self._own = own
        self._maps = Mappings(writable=False)

    def view(self, shared: pb.SharedObject) -> memoryview:
        local = self._own.local(shared)
        return (local if local is not None else memoryview(self._maps.get(shared)))[:shared.lengths[0]]


class ResultParts:
    """Where this process's members write their parts of a result: the leader's segment, its own
    or mapped writable."""

    def __init__(self, own: Arena) -> None:
        self._own = own
        self._maps = Mappings(writable=True)

    def part(self, shared: pb.SharedObject, index: int, start: int, length: int) -> memoryview:
        """``length`` writable bytes of buffer ``index`` of the result segment ``shared``, from ``start``."""
        begin = shared.offsets[index] + start
        segment = self._own.segment(shared.fd) if shared.pid == os.getpid() else None
        if segment is not None and segment.inode == shared.inode:
            return memoryview(segment.view)[begin:begin + length]
        return memoryview(self._maps.get(shared))[begin:begin + length]
