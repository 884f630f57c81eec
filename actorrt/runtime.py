"""The one per-process runtime accessor.

A driver process has a ``Driver`` after ``actorrt.init()``; a node process has its ``NodeProcess``.
Both expose ``.worker`` (the core) and the calls the public API makes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from actorrt.exceptions import NotInitializedError

if TYPE_CHECKING:
    from actorrt.worker import Worker


class Runtime(Protocol):
    worker: Worker


_current: Runtime | None = None


def set_current(rt: Runtime | None) -> None:
    global _current
    _current = rt


def current() -> Runtime:
    if _current is None:
        raise NotInitializedError("actorrt is not initialized: call actorrt.init() first")
    return _current


def is_initialized() -> bool:
    return _current is not None


def release(object_id: bytes) -> None:
    """Free an owned object whose last ref went away (called from ``ObjectRef.__del__``)."""
    if _current is not None:
        _current.worker.release(object_id)


def current_task_id() -> bytes:
    """The ID of the task running now in this actor (empty outside tasks)."""
    from actorrt.worker import current_sender

    ctx = current_sender.get(None)
    return ctx.current_task if ctx is not None else b""
