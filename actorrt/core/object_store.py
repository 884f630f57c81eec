"""A process's object store: task results by ObjectID, in their wire form.

Values stay serialized until someone reads them, so an object forwarded to another process is
never pickled twice. A reader waits on an entry that has no value yet.
"""

from __future__ import annotations

import asyncio

from actorrt.rpc import common_pb2 as pb


class ObjectStore:
    def __init__(self) -> None:
        self._entries: dict[bytes, asyncio.Future[pb.ObjectValue]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, object_id: bytes) -> bool:
        return object_id in self._entries

    def expect(self, object_id: bytes) -> asyncio.Future[pb.ObjectValue]:
        """The entry for ``object_id``, created empty if absent."""
        fut = self._entries.get(object_id)
        if fut is None:
            fut = self._entries[object_id] = asyncio.get_running_loop().create_future()
        return fut

    def put(self, value: pb.ObjectValue) -> bool:
        """Fill the entry for ``value.object_id``; False if nobody expects it or it is filled."""
        fut = self._entries.get(value.object_id)
        if fut is None or fut.done():
            return False
        fut.set_result(value)
        return True

    def release(self, object_id: bytes) -> None:
        fut = self._entries.pop(object_id, None)
        if fut is not None and not fut.done():
            fut.cancel()
