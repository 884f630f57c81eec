"""A process's object store: task results and arguments by ObjectID, in their wire form.

Values stay serialized until someone reads them, so an object forwarded to another process is
never pickled twice. A reader waits on an entry that has no value yet. An object kept only for
other actors' replays may be *spilled*: its bytes go to a local file, and a reader gets them back
from there.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from actorrt.rpc import common_pb2 as pb


class ObjectStore:
    def __init__(self) -> None:
        self._entries: dict[bytes, asyncio.Future[pb.ObjectValue]] = {}
        self._spilled: dict[bytes, Path] = {}

    def __len__(self) -> int:
        return len(self._entries) + len(self._spilled)

    def __contains__(self, object_id: bytes) -> bool:
        return object_id in self._entries or object_id in self._spilled

    def expect(self, object_id: bytes) -> asyncio.Future[pb.ObjectValue]:
        """The entry for ``object_id``, created empty if absent (read back if spilled)."""
        fut = self._entries.get(object_id)
        if fut is None:
            fut = asyncio.get_running_loop().create_future()
            path = self._spilled.get(object_id)
            if path is None:
                self._entries[object_id] = fut
            else:  # a rare read (a replay's fetch): from the file each time, so memory stays bounded
                fut.set_result(pb.ObjectValue.FromString(path.read_bytes()))
        return fut

    def put(self, value: pb.ObjectValue) -> bool:
        """Fill the entry for ``value.object_id``; False if nobody expects it or it is filled."""
        fut = self._entries.get(value.object_id)
        if fut is None or fut.done():
            return False
        fut.set_result(value)
        return True

    def size(self, object_id: bytes) -> int | None:
        """The wire size of a value held in memory (None if absent, spilled or not there yet)."""
        fut = self._entries.get(object_id)
        if fut is None or not fut.done() or fut.cancelled():
            return None
        return fut.result().ByteSize()

    def spill(self, object_id: bytes, path: Path) -> int:
        """Move a value held in memory to ``path``; returns its size (0 if there was none to move)."""
        fut = self._entries.get(object_id)
        if fut is None or not fut.done() or fut.cancelled():
            return 0
        data = fut.result().SerializeToString()
        path.write_bytes(data)
        del self._entries[object_id]
        self._spilled[object_id] = path
        return len(data)

    def release(self, object_id: bytes) -> None:
        fut = self._entries.pop(object_id, None)
        if fut is not None and not fut.done():
            fut.cancel()
        path = self._spilled.pop(object_id, None)
        if path is not None:
            path.unlink(missing_ok=True)
