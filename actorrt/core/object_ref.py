"""ObjectRef: a future value, the return of a task."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Generator
from typing import Any

from actorrt.core import context
from actorrt.lineage import ids
from actorrt.rpc import common_pb2 as pb


class ObjectRef:
    """A reference to a task's return value.

    Pass it to ``actorrt.get``, ``await`` it, or pass it as an argument to another task (the
    receiver resolves it before the task runs). Refs are picklable; a pickled ref is a borrowed
    one, and its owner keeps the value for the rest of the session.
    """

    __slots__ = ("object_id", "owner_address", "producer", "owner_actor", "_owned", "_retrieved", "_polled")

    def __init__(self, object_id: bytes, owner_address: str, producer: bytes = b"", owned: bool = False,
                 owner_actor: bytes = b"") -> None:
        self.object_id = object_id
        self.owner_address = owner_address
        self.producer = producer  # the actor whose task makes it: who an await of it waits for
        self.owner_actor = owner_actor  # the actor whose task made the ref, if one did
        self._owned = owned  # this process holds the value and may free it when the ref goes
        self._retrieved = False  # a get or an await asked for the value (else its error is reported when dropped)
        self._polled = False  # a wait (or a get that timed out) keeps its value, or its fetch, for a later get

    @classmethod
    def from_proto(cls, proto: pb.ObjectRefProto) -> ObjectRef:
        return cls(proto.object_id, proto.owner_address, proto.producer, owner_actor=proto.owner_actor)

    def to_proto(self) -> pb.ObjectRefProto:
        return pb.ObjectRefProto(object_id=self.object_id, owner_address=self.owner_address, producer=self.producer,
                                 owner_actor=self.owner_actor)

    def __reduce__(self) -> tuple:
        self._owned = False  # someone else may ask for the value later
        return (ObjectRef, (self.object_id, self.owner_address, self.producer, False, self.owner_actor))

    def __await__(self) -> Generator[Any, None, Any]:
        self._retrieved = True
        return context.current().worker.get_async(self).__await__()

    def as_future(self) -> asyncio.Future:
        """The value as a future of the running event loop (for ``asyncio.wait`` and the like)."""
        return asyncio.ensure_future(self._value())

    async def _value(self) -> Any:
        return await self

    def future(self) -> concurrent.futures.Future:
        """The value as a ``concurrent.futures.Future``, for threads (``as_completed``, callbacks)."""
        self._retrieved = True
        worker = context.current().worker
        return asyncio.run_coroutine_threadsafe(worker.get_async(self), worker.loop)

    def mark_retrieved(self) -> None:
        """Whatever its value, nobody need hear of it when the ref goes (the runtime's own calls)."""
        self._retrieved = True

    def __del__(self) -> None:
        if self._owned or self._polled:
            context.release(self.object_id, self._retrieved, self._owned)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectRef) and other.object_id == self.object_id

    def __hash__(self) -> int:
        return hash(self.object_id)

    def __repr__(self) -> str:
        return f"ObjectRef({ids.short(self.object_id)})"
