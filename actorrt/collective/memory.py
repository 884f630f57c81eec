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

    def __init__(self, host: str, address: str) -> None:
        self._host = host
        self._address = address
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
                               creator_pid=pid, offsets=[0], lengths=[array.nbytes])

    def local(self, shared: pb.SharedObject) -> memoryview | None:
        """The buffer ``shared`` names, if this process made it."""
        segment = self._arena.segment(shared.fd)
        return memoryview(segment.view) if segment is not None and segment.inode == shared.inode else None

    def forget_group(self, gid: bytes) -> None:
        for key in [k for k in self._buffers if k[0] == gid]:
            self._arena.discard(self._buffers.pop(key))

    def close(self) -> None:
        self._arena.close()


class PeerMappings:
    """Read-only mappings of other processes' input buffers, kept while they are in use."""

    def __init__(self, own: InputBuffers) -> None:
        self._own = own
        self._maps: dict[tuple[int, int, int], mmap.mmap] = {}  # (pid, fd, inode)

    def view(self, shared: pb.SharedObject) -> memoryview:
        """The bytes of the input ``shared`` names.

        Raises:
            OSError: its process is gone, and with it the buffer (unless mapped here before).
        """
        local = self._own.local(shared)
        if local is not None:
            return local[:shared.lengths[0]]
        key = (shared.pid, shared.fd, shared.inode)
        mapped = self._maps.get(key)
        if mapped is None:
            mapped = self._maps[key] = map_segment(shared, writable=False)
        return memoryview(mapped)[:shared.lengths[0]]

    def forget(self, keep: set[tuple[int, int, int]]) -> None:
        """Unmap what is not in ``keep`` (buffers that were replaced, processes that died)."""
        for key in [k for k in self._maps if k not in keep]:
            try:
                self._maps.pop(key).close()
            except BufferError:  # an array still reads it: it goes with that array
                pass


class ResultMappings:
    """Writable mappings of other processes' result segments, for the parts this process's members
    write. A leader's segments are recycled from call to call, so a mapping kept from one call
    serves the next without a page fault; the least recently used go past ``max_bytes`` (a
    mapping keeps its segment alive after the leader let go of it)."""

    def __init__(self, own: Arena, max_bytes: int = 1 << 30) -> None:
        self._own = own
        self._max_bytes = max_bytes
        self._maps: OrderedDict[tuple[int, int, int], mmap.mmap] = OrderedDict()
        self._bytes = 0

    def part(self, shared: pb.SharedObject, index: int, start: int, length: int) -> memoryview:
        """``length`` writable bytes of buffer ``index`` of the result segment ``shared``, from ``start``.

        Raises:
            OSError: the leader's process is gone, and its segment with it.
        """
        begin = shared.offsets[index] + start
        segment = self._own.segment(shared.fd) if shared.pid == os.getpid() else None
        if segment is not None and segment.inode == shared.inode:
            return memoryview(segment.view)[begin:begin + length]
        key = (shared.pid, shared.fd, shared.inode)
        mapped = self._maps.get(key)
        if mapped is None:
            mapped = self._maps[key] = map_segment(shared, writable=True)
            self._bytes += len(mapped)
            self._evict()
        self._maps.move_to_end(key)
        return memoryview(mapped)[begin:begin + length]

    def _evict(self) -> None:
        while self._bytes > self._max_bytes and len(self._maps) > 1:
            _, mapped = self._maps.popitem(last=False)
            self._bytes -= len(mapped)
            try:
                mapped.close()
            except BufferError:  # a part is being written: the mapping goes when it is done
                pass

    def forget(self, pids: set[int]) -> None:
        """Unmap the segments of processes that died (the kernel frees what nobody maps)."""
        for key in [k for k in self._maps if k[0] in pids]:
            mapped = self._maps.pop(key)
            self._bytes -= len(mapped)
            try:
                mapped.close()
            except BufferError:
                pass
