"""A process's object store: task results and arguments by ObjectID, in their wire form.

Values stay serialized until someone reads them, so an object forwarded to another process is
never pickled twice. A value whose buffers are in shared memory is *held* while an entry keeps it
(``objects/shared.py``): its segment is not reused under it. A reader waits on an entry that has
no value yet. An object kept only for other actors' replays may be *spilled*: its bytes go to a
local file, and a reader gets them back from there. The making of an object may be *deferred*:
its task is sent only once a reader asks for it (a replay does not send again what its receiver
ran already, unless the result is needed).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from actorrt.objects.shared import SharedObjects
from actorrt.rpc import common_pb2 as pb

log = logging.getLogger(__name__)


def _read_value(path: Path) -> pb.ObjectValue:
    return pb.ObjectValue.FromString(path.read_bytes())


def shared_part(value: pb.ObjectValue) -> pb.SharedObject | None:
    """The shared-memory descriptor of ``value``'s buffers, if they are in shared memory."""
    return value.value.shared if value.WhichOneof("kind") == "value" and value.value.HasField("shared") else None


def wire_size(value: pb.ObjectValue) -> int:
    """The bytes ``value`` holds: its message, and its buffers in shared memory."""
    shared = shared_part(value)
    return value.ByteSize() + (sum(shared.lengths) if shared is not None else 0)


class ObjectStore:
    def __init__(self) -> None:
        self._entries: dict[bytes, asyncio.Future[pb.ObjectValue]] = {}
        self._spilled: dict[bytes, Path] = {}
        # object id -> (what makes it, once asked for; what forgets it, if released before)
        self._deferred: dict[bytes, tuple[Callable[[], None], Callable[[], None]]] = {}
        self.shared: SharedObjects | None = None  # once the process serves

    def __len__(self) -> int:
        return len(self._entries) + len(self._spilled)

    def __contains__(self, object_id: bytes) -> bool:
        return object_id in self._entries or object_id in self._spilled

    def defer(self, object_id: bytes, make: Callable[[], None], forget: Callable[[], None]) -> None:
        """``object_id`` (expected) is made by ``make()``, called when it is first asked for;
        ``forget()`` is called instead if it is released before."""
        self._deferred[object_id] = (make, forget)

    def is_deferred(self, object_id: bytes) -> bool:
        """Whether ``object_id`` is deferred and not asked for yet (``defer``)."""
        return object_id in self._deferred

    def expect(self, object_id: bytes) -> asyncio.Future[pb.ObjectValue]:
        """The entry for ``object_id``, created empty if absent (read back if spilled); a
        deferred object is made now."""
        deferred = self._deferred.pop(object_id, None)
        if deferred is not None:
            deferred[0]()
        fut = self._entries.get(object_id)
        if fut is None:
            loop = asyncio.get_running_loop()
            path = self._spilled.get(object_id)
            if path is None:
                fut = self._entries[object_id] = loop.create_future()
            else:  # a rare read (a replay's fetch): from the file each time, so memory stays bounded
                fut = asyncio.ensure_future(asyncio.to_thread(_read_value, path))
        return fut

    def put(self, value: pb.ObjectValue) -> bool:
        """Fill the entry for ``value.object_id``; False if nobody expects it or it is filled."""
        fut = self._entries.get(value.object_id)
        if fut is None or fut.done():
            return False
        fut.set_result(self._held(value))
        return True

    def _held(self, value: pb.ObjectValue) -> pb.ObjectValue:
        shared = shared_part(value)
        if shared is None or self.shared is None or self.shared.hold(shared):
            return value
        return pb.ObjectValue(object_id=value.object_id, error=pb.RemoteError(
            kind=pb.OBJECT_LOST, message=f"object {value.object_id.hex()[:12]} was in shared memory that every "
                                         f"process holding it let go of"))

    def _let_go(self, fut: asyncio.Future[pb.ObjectValue]) -> None:
        if fut.done() and not fut.cancelled() and self.shared is not None:
            shared = shared_part(fut.result())
            if shared is not None:
                self.shared.unhold(shared)

    def held(self, object_id: bytes) -> pb.ObjectValue | None:
        """The value held in memory for ``object_id``, if it is there."""
        fut = self._entries.get(object_id)
        return fut.result() if fut is not None and fut.done() and not fut.cancelled() else None

    def size(self, object_id: bytes) -> int | None:
        """The wire size of a value held in memory (None if absent, spilled or not there yet)."""
        fut = self._entries.get(object_id)
        if fut is None or not fut.done() or fut.cancelled():
            return None
        return wire_size(fut.result())

    def kept_for_replays(self, object_id: bytes, budget_bytes: int) -> None:
        """The value held for ``object_id`` stays until receivers' checkpoints: its shared segment
        gets a spare, within ``budget_bytes`` (``Arena.keep``)."""
        value = self.held(object_id)
        shared = shared_part(value) if value is not None else None
        if shared is not None and self.shared is not None:
            self.shared.kept(shared, budget_bytes)

    def spill(self, object_id: bytes, path: Path) -> int:
        """Move a value held in memory to ``path``; returns its size (0 if there was none to move).
        The file is written off the event loop; readers get the value from memory until then."""
        fut = self._entries.get(object_id)
        if fut is None or not fut.done() or fut.cancelled():
            return 0
        value = fut.result()
        data = (self.shared.materialize(value) if self.shared else value).SerializeToString()  # a file holds bytes

        def written(done: asyncio.Future) -> None:
            if done.exception() is not None:
                log.warning("could not spill object %s to %s (%s); it stays in memory",
                            object_id.hex()[:8], path, done.exception())
            if done.exception() is not None or self._entries.get(object_id) is not fut:
                path.unlink(missing_ok=True)  # failed, or released meanwhile
            else:
                del self._entries[object_id]
                self._spilled[object_id] = path
                self._let_go(fut)

        asyncio.ensure_future(asyncio.to_thread(path.write_bytes, data)).add_done_callback(written)
        return len(data)

    def release(self, object_id: bytes) -> None:
        deferred = self._deferred.pop(object_id, None)
        if deferred is not None:
            deferred[1]()
        fut = self._entries.pop(object_id, None)
        if fut is not None and not fut.done():
            fut.cancel()
        elif fut is not None:
            self._let_go(fut)
        path = self._spilled.pop(object_id, None)
        if path is not None:
            path.unlink(missing_ok=True)
