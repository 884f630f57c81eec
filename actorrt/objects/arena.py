"""A process's arena: the shared-memory segments it writes large objects into.

Each large object gets a segment of its own: a ``memfd`` (an anonymous shared-memory file), sized
with ``posix_fallocate`` and mapped here with its pages populated. Other processes of the host map
it read-only through ``/proc/<pid>/fd/<fd>``. Why these choices:

- ``memfd`` and not named segments in ``/dev/shm``: a segment lives exactly as long as some
  process holds it open or mapped, so a crash leaks nothing and no sweep is needed; and it is not
  bounded by the size of ``/dev/shm`` (64 MB in many containers), only by memory.
- ``posix_fallocate`` before use: shared memory that cannot be had fails here, as an error the
  caller handles (the value then travels inline), never as a SIGBUS at the first write.
- Segments are recycled: a segment whose object nobody holds any more goes to a pool, keeping its
  pages and its mapping, and the next object of a similar size is written into it without page
  faults. The pool keeps at most ``pool_bytes``, the most recently used first; what is over is
  closed.
- Segments kept for replays have spares: an object pinned until its receiver's checkpoint (the
  default ``ft``) holds its segment out of the pool for many calls, so each call would otherwise
  fault in a fresh one (at 100 MB, ~70 ms against ~10 ms for the copy). When a segment is kept
  (``keep``) and none of its size is idle, the arena makes a spare of that size in a background
  thread, pre-faulted, and pools it, while kept segments and spares stay within the pinned budget.
  The segments of a size grow, off the writers' path, to as many as are kept between two
  checkpoints of the receivers plus one; from then on kept ones come back as fast as calls take
  them, and no call faults in pages. A writer that finds no idle segment but a spare of its size
  under way waits for it rather than faulting in a second one beside it.
- One segment per object, not a heap of them in one slab: a segment is the unit the kernel
  reference-counts, so a reader's mapping keeps exactly its object alive, whatever this process does.
"""

from __future__ import annotations

import itertools
import logging
import mmap
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

PAGE = mmap.PAGESIZE
ALIGN = 64  # each buffer starts on a cache line (and numpy's alignment)
DEFAULT_POOL_BYTES = 1 << 30


class ArenaFullError(MemoryError):
    """The host has no shared memory left for an object of this size."""


def size_class(size: int) -> int:
    """The segment size for an object of ``size`` bytes: whole pages, rounded up to one of four
    sizes per power of two (at most 25% more), so that recycled segments fit later objects."""
    size = max(size, PAGE)
    step = max(PAGE, 1 << max(size.bit_length() - 3, 0))
    return -(-size // step) * step


@dataclass(eq=False)
class Segment:
    """A memfd this process created, and its writable mapping here."""

    fd: int
    size: int
    inode: int
    view: mmap.mmap
    generation: int = 0  # how often it was reused: a holder names the use it holds
    in_use: bool = field(default=True)
    kept: bool = False  # its object is kept for replays (``Arena.keep``)
    pooled_at: int = 0

    def close(self) -> None:
        try:
            self.view.close()
        except BufferError:  # a view of it is still alive here: the mapping goes with the last one
            pass
        os.close(self.fd)


class Arena:
    """The segments of one process: created, handed out, taken back into a pool, closed."""

    def __init__(self, pool_bytes: int = DEFAULT_POOL_BYTES) -> None:
        self.pool_bytes = pool_bytes
        self._lock = threading.Lock()  # drivers write from their callers' threads
        self._spare_made = threading.Condition(self._lock)
        self._pool: dict[int, list[Segment]] = {}  # size -> idle segments, the most recently pooled last
        self._pooled_bytes = 0
        self._in_use: dict[int, Segment] = {}  # fd -> segment
        self.in_use_bytes = 0
        self._kept_bytes = 0  # of segments in use whose objects are kept for replays
        self._making: dict[int, int] = {}  # size -> spares under way
        self._making_bytes = 0
        self._maker: ThreadPoolExecutor | None = None  # one thread: spares fault in pages one at a time
        self.created = 0  # on a writer's path (it paid the page faults)
        self.spares = 0  # in the background
        self.reused = 0
        self._clock = itertools.count()
        self.closed = False

    def allocate(self, nbytes: int, populate: bool = True) -> Segment:
        """A segment of at least ``nbytes``, reused if one is idle. ``populate=False`` for one
        that other processes write (a collective's result): mapping its pages in here first
        would cost more than the writing (36 ms for 100 MB).

        Raises:
            ArenaFullError: the host has no shared memory for it.
        """
        size = size_class(nbytes)
        with self._lock:
            while not self._pool.get(size) and self._making.get(size) and not self.closed:
                self._spare_made.wait()  # its pages are being faulted in already
            idle = self._pool.get(size)
            segment = idle.pop() if idle else None
            if segment is not None:
                self._pooled_bytes -= size
                segment.generation += 1
                self.reused += 1
        if segment is None:
            segment = self._create(size, populate)
            with self._lock:
                self.created += 1
        return self._hand_out(segment)

    def _create(self, size: int, populate: bool) -> Segment:
        fd = os.memfd_create("actorrt-object", os.MFD_CLOEXEC)
        try:
            os.posix_fallocate(fd, 0, size)
            view = mmap.mmap(fd, size, flags=mmap.MAP_SHARED | (mmap.MAP_POPULATE if populate else 0))
        except OSError as exc:
            os.close(fd)
            raise ArenaFullError(f"no shared memory for an object of {size >> 20} MiB: {exc}") from exc
        return Segment(fd, size, os.fstat(fd).st_ino, view)

    def _hand_out(self, segment: Segment) -> Segment:
        with self._lock:
            segment.in_use = True
            self._in_use[segment.fd] = segment
            self.in_use_bytes += segment.size
        return segment

    def keep(self, segment: Segment, budget_bytes: int) -> None:
        """``segment``'s object is kept for replays: it stays out of the pool until the receivers'
        checkpoints let it go. If no segment of its size is idle, have a spare made, pre-faulted,
        in the background, for the next writer of the size, while kept segments and spares under
        way stay within ``budget_bytes``; pooled, it pushes out the least recently pooled ones
        past the pool's bound (idle segments of sizes no longer written)."""
        with self._lock:
            if segment.kept or not segment.in_use or self.closed:
                return
            segment.kept = True
            size = segment.size
            self._kept_bytes += size
            if self._pool.get(size) or self._making.get(size) or size > self.pool_bytes:
                return  # the next writer of the size has one, or none could be pooled
            if self._kept_bytes + self._making_bytes + size > budget_bytes:
                return  # kept objects and their spares stay within the budget
            self._making[size] = self._making.get(size, 0) + 1
            self._making_bytes += size
            if self._maker is None:
                self._maker = ThreadPoolExecutor(1, thread_name_prefix="actorrt-spares")
            self._maker.submit(self._make_spare, size)  # under the lock: close() shuts it after

    def _make_spare(self, size: int) -> None:
        segment = None
        try:
            segment = self._create(size, populate=True)
        except ArenaFullError as exc:  # none now: a writer that needs one tries again itself
            log.info("no spare segment: %s", exc)
        finally:
            with self._lock:
                self._making[size] -= 1
                self._making_bytes -= size
                evicted = [segment] if segment is not None else []
                if segment is not None and not self.closed:
                    segment.in_use = False
                    self.spares += 1
                    evicted = self._pool_locked(segment)
                self._spare_made.notify_all()
            for old in evicted:
                old.close()

    def recycle(self, segment: Segment) -> None:
        """Nobody holds ``segment``'s object any more: pool it for the next one, or close it."""
        with self._lock:
            if not segment.in_use:
                return
            self._let_go_locked(segment)
            if not self.closed and segment.size <= self.pool_bytes:
                evicted = self._pool_locked(segment)
            else:
                evicted = [segment]
        for old in evicted:
            old.close()

    def _let_go_locked(self, segment: Segment) -> None:
        segment.in_use = False
        self._in_use.pop(segment.fd, None)
        self.in_use_bytes -= segment.size
        if segment.kept:
            segment.kept = False
            self._kept_bytes -= segment.size

    def _pool_locked(self, segment: Segment) -> list[Segment]:
        """Pool ``segment``; returns what it pushed out of the pool, to close."""
        evicted = []
        while self._pooled_bytes + segment.size > self.pool_bytes:
            evicted.append(self._evict_oldest())
        self._pool.setdefault(segment.size, []).append(segment)
        self._pooled_bytes += segment.size
        segment.pooled_at = next(self._clock)
        return evicted

    def _evict_oldest(self) -> Segment:
        size, idle = min(((size, idle) for size, idle in self._pool.items() if idle), key=lambda p: p[1][0].pooled_at)
        segment = idle.pop(0)
        self._pooled_bytes -= size
        return segment

    def discard(self, segment: Segment) -> None:
        """Close ``segment`` instead of pooling it: other processes may still map it (the kernel
        frees it with the last of them), so it must never hold another object."""
        with self._lock:
            if segment.in_use:
                self._let_go_locked(segment)
        segment.close()

    def segment(self, fd: int) -> Segment | None:
        """The segment in use under ``fd``."""
        return self._in_use.get(fd)

    def stats(self) -> dict[str, int]:
        """What a node reports (``SharedMemory``): ``created`` counts the segments a writer faulted
        in on its own path, not the spares made beside it."""
        with self._lock:
            return {"in_use_bytes": self.in_use_bytes, "in_use": len(self._in_use), "pooled_bytes": self._pooled_bytes,
                    "created": self.created, "reused": self.reused}

    def close(self) -> None:
        """Close every segment (mappings other processes hold stay valid: the kernel keeps them)."""
        with self._lock:
            self.closed = True
            segments = [s for idle in self._pool.values() for s in idle] + list(self._in_use.values())
            self._pool.clear()
            self._in_use.clear()
            self._pooled_bytes = self.in_use_bytes = 0
            self._spare_made.notify_all()
        if self._maker is not None:
            self._maker.shutdown(wait=False, cancel_futures=True)  # one under way closes its segment
        for segment in segments:
            segment.close()
