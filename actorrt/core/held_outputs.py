"""What an actor with a checkpointing policy made, held until it is reproducible.

Such an actor logs nothing as it runs, and after a failure it goes back to its checkpoint and
runs again what came after, maybe in another order (its callers' calls arrive as they arrive).
So nothing it made may reach another actor before a checkpoint covers it: its calls to other
actors (not those to itself, which go back with it), and its results, except a lazy actor's
plain acknowledgements (a None result tells its caller nothing that a re-run could change).

Held outputs leave in the order they were made: up to a checkpoint once it is durable, or all of
them once the tasks that made them are written to the store (an *escape*: the actor waits for a
call it made, returns a value, or commits its lineage; a replay then reproduces them).
"""

from __future__ import annotations

import contextvars
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from actorrt.core import context
from actorrt.lineage import ids
from actorrt.rpc import common_pb2 as pb

T = TypeVar("T")


@dataclass
class HeldCall:
    spec: pb.TaskSpec
    slot: int
    large_args: list[pb.ObjectValue]
    send: Callable[[], None]  # sends it as it would have gone


@dataclass
class HeldResult:
    send: Callable[[], None]


class HeldOutputs:
    def __init__(self) -> None:
        self._held: deque[HeldCall | HeldResult] = deque()
        self._released = 0  # outputs released so far: the next one's absolute number
        self._calls: dict[bytes, HeldCall] = {}  # held calls by object id of their result

    def __len__(self) -> int:
        return len(self._held)

    def hold_call(self, spec: pb.TaskSpec, slot: int, large_args: list[pb.ObjectValue],
                  send: Callable[[], None]) -> None:
        call = HeldCall(spec, slot, large_args, send)
        self._held.append(call)
        self._calls[ids.object_id(spec.task_id)] = call

    def hold_result(self, send: Callable[[], None]) -> None:
        self._held.append(HeldResult(send))

    def holds(self, object_ids: Any) -> bool:
        """Whether any of ``object_ids`` is the result of a call held here."""
        return any(object_id in self._calls for object_id in object_ids)

    def mark(self) -> int:
        """Where a checkpoint taken now stands: it covers every output held so far."""
        return self._released + len(self._held)

    def release(self, upto: int | None = None) -> None:
        """Send the outputs held before ``upto`` (a ``mark``; None: all of them), in order."""
        while self._held and (upto is None or self._released < upto):
            output = self._held.popleft()
            self._released += 1
            if isinstance(output, HeldCall):
                del self._calls[ids.object_id(output.spec.task_id)]
            output.send()

    def calls(self) -> list[HeldCall]:
        """The calls held now, for a checkpoint: a restore sends them (their receivers run each once)."""
        return [call for call in self._held if isinstance(call, HeldCall)]


# Set while a producer waits for its consumers (back-pressure): what they answer does not depend on
# what it holds for them, which comes after in each channel, so the wait sends nothing held.
behind: contextvars.ContextVar[bool] = contextvars.ContextVar("actorrt_behind_held", default=False)


async def waiting_behind(awaitable: Awaitable[T]) -> T:
    """``await awaitable``, a wait for calls that left, behind the calls still held (back-pressure
    in a graph without cycles: a streaming producer's)."""
    token = behind.set(True)
    try:
        return await awaitable
    finally:
        behind.reset(token)


def held_here(object_id: bytes) -> bool:
    """Whether the actor running now holds the call whose result is ``object_id`` (a producer's
    back-pressure does not wait for such a call: the actor's checkpoint sends it)."""
    sender = context.current_sender.get(None)
    host = context.current().worker.host if sender is not None else None
    actor = host.actors.get(sender.sender_id) if host is not None else None
    return actor is not None and actor.held is not None and actor.held.holds([object_id])
