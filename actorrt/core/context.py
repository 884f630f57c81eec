"""What runs in this process now: its runtime, and the actor task being executed.

A leaf module: it imports nothing of actorrt's at run time (the imports below are for type
checkers only), so every layer can read "who is running" without an import cycle, as trio keeps
its per-run state in ``_core/_run_context.py``.

A driver process has a ``Driver`` as its runtime after ``actorrt.init()``; a node process has its
``NodeProcess``. Both expose ``.worker`` (the core) and ``.get()``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from actorrt.exceptions import ActorRTError, NotInitializedError

if TYPE_CHECKING:
    from actorrt.core.object_ref import ObjectRef
    from actorrt.core.task_spec import SenderContext
    from actorrt.core.worker import Worker
    from actorrt.lineage.application_log import RunningTask
    from actorrt.rpc.common_pb2 import TaskSpec
    from actorrt.rpc.head_pb2 import NamedActor

T = TypeVar("T")


class Runtime(Protocol):
    worker: Worker

    def get(self, refs: ObjectRef | Sequence[ObjectRef], timeout: float | None) -> Any: ...

    def wait(self, refs: Sequence[ObjectRef], num_returns: int,
             timeout: float | None) -> tuple[list[ObjectRef], list[ObjectRef]]: ...

    def head_reachable(self) -> None:
        """Return once the head answers (a driver: before it takes a name while holding its
        submission order; raises HeadUnavailableError past the bound). At once where names are
        taken in the background."""
        ...

    def name_actor(self, actor: NamedActor) -> NamedActor | None:
        """Take ``actor.name``: the actor that has it (None where it is taken in the background)."""
        ...

    def free_actor_names(self, actor_id: bytes) -> None: ...

    def find_actor(self, name: str) -> NamedActor | None:
        """The actor named ``name``, or None (drivers only: it waits for the head)."""
        ...


_current: Runtime | None = None

# The actor whose task is running now; unset outside tasks (the process itself submits then).
current_sender: contextvars.ContextVar[SenderContext] = contextvars.ContextVar("current_sender")
# The spec version of the task running now, and how far its application log was replayed.
running_task: contextvars.ContextVar[RunningTask] = contextvars.ContextVar("running_task")


def set_current(rt: Runtime | None) -> None:
    global _current
    _current = rt


def current() -> Runtime:
    if _current is None:
        raise NotInitializedError("actorrt is not initialized: call actorrt.init() first")
    return _current


# Starts a runtime with ``init()``'s defaults (``lifecycle`` sets it): Ray programs rely on the
# first ``.remote()`` doing so.
_start_default: Callable[[], None] | None = None


def set_default_start(start: Callable[[], None]) -> None:
    global _start_default
    _start_default = start


def current_or_start() -> Runtime:
    """The runtime; in a process that has none, one ``init()`` starts with its defaults first."""
    if _current is None and _start_default is not None:
        _start_default()
    return current()


def is_initialized() -> bool:
    return _current is not None


def release(object_id: bytes, retrieved: bool, owned: bool) -> None:
    """A ref that is owned, or whose value a wait kept, went away (called from ``ObjectRef.__del__``):
    what is kept for it goes; ``retrieved``: its value was asked for (else an error it holds is reported)."""
    if _current is not None:
        _current.worker.release(object_id, retrieved, owned)


def keep_actor(actor_id: bytes) -> None:
    """A copy of the creator's handle of ``actor_id`` was made: it is not released with that handle."""
    if _current is not None:
        _current.worker.releases.copied(actor_id)


def current_task_id() -> bytes:
    """The ID of the task running now in this actor (empty outside tasks)."""
    ctx = current_sender.get(None)
    return ctx.current_task if ctx is not None else b""


def record(fn: Callable[[], T], on_new_version: Callable[[TaskSpec], None]) -> T:
    """``fn()``, logged in the running task's application log (see ``RunningTask.record``);
    outside actor tasks nothing is replayed, so it is just ``fn()``."""
    sender = current_sender.get(None)
    if sender is not None and sender.function:
        raise ActorRTError(f"actorrt.record() in remote function {sender.function}: a remote function is run again "
                           f"after a failure, not replayed, so it must not depend on what record() is for; pass "
                           f"the value as an argument, or make it an actor method")
    task = running_task.get(None)
    return fn() if task is None else task.record(fn, on_new_version)
