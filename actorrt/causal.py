"""Causal services: what an actor task reads from outside its lineage, made replayable.

A replay re-executes an actor's tasks with the same inputs in the same order; whatever else a
task reads (the clock, random numbers, an outside service, a timer's firing) must come back the
same, or the rebuilt actor diverges from the one its peers saw. These functions record such
values as they are taken, in the running task's application log (small entries, logged like any
new version of its spec), and give the recorded values back on a replay:

- ``record(fn, *args)``: any call, run once; its result is what every replay sees.
- ``now()``: wall-clock time.
- ``rng()`` and ``random()``: a numpy ``Generator`` per actor, its seed recorded when first
  drawn from. Draws need no log of their own: replay makes them in the same order, and the
  generator's state is part of the actor's, in its checkpoints.
- ``call_later`` and ``call_every``: timers whose firings are tasks at definite, recorded places
  in the actor's order (``core/timers.py``).

What stays the user's: an outside call whose *effect* is not idempotent. ``record`` makes its
result replay, but a node that dies while the call is under way (before the value is logged) has
it run again by the replay. Make such calls idempotent (a request ID derived from the task, for
example ``record``ed once and reused), or write through an exactly-once sink.

Outside actor tasks (a driver) nothing is replayed: these just call through.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from actorrt.core import context
from actorrt.core.timers import TimerEntry
from actorrt.exceptions import ActorRTError
from actorrt.handles import ActorMethod

if TYPE_CHECKING:  # numpy is imported on the first rng(): every process imports this module
    import numpy as np

T = TypeVar("T")

# Where an actor's generator lives in ``SenderContext.extras`` (checkpointed with it).
RNG_EXTRA = "actorrt.rng"
_driver_rng: np.random.Generator | None = None


def record(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, logged so that a replay of the task gets the same value back.

    Call it inside an actor task for whatever the lineage does not determine: a clock reading, a
    random draw, a read from an outside service. The value is logged in the running task's
    application log (a new version of its spec); a replay of the task after a failure gets the
    logged values back, in order, instead of calling ``fn`` again.

    Args:
        fn: the call to make; its return value must be picklable.
        *args, **kwargs: its arguments.

    Returns:
        ``fn(*args, **kwargs)`` on the first run, the logged value on a replay. Outside actor
        tasks, just ``fn(*args, **kwargs)``.

    Raises:
        ActorRTError: called in a remote function, which is run again, not replayed, after a failure.
    """
    if not callable(fn):
        raise TypeError(f"record() takes a function to call and log (e.g. time.time), not a {type(fn).__name__}")
    rt = context.current() if context.is_initialized() else None
    ft = rt.worker.ft if rt is not None else None
    call = (lambda: fn(*args, **kwargs)) if args or kwargs else fn
    return context.record(call, ft.on_record if ft is not None else lambda spec: None)


def now() -> float:
    """Wall-clock time (``time.time()``), recorded: a replay of the task reads the same."""
    return record(time.time)


def rng() -> np.random.Generator:
    """The running actor's random generator: seeded from a recorded draw the first time, then
    kept with the actor's state (its checkpoints too), so a replay draws the same numbers in the
    same order. In a driver, a generator of the process (nothing replays a driver)."""
    global _driver_rng
    import numpy as np

    sender = context.current_sender.get(None)
    if sender is None or context.running_task.get(None) is None:
        if _driver_rng is None:
            _driver_rng = np.random.default_rng()
        return _driver_rng
    generator = sender.extras.get(RNG_EXTRA)
    if generator is None:
        generator = sender.extras[RNG_EXTRA] = np.random.default_rng(record(secrets.randbits, 128))
    return generator


def random() -> float:
    """A float in [0, 1) from ``rng()``: the same on a replay."""
    return float(rng().random())


@dataclass(frozen=True)
class Timer:
    """A timer set by ``call_later`` or ``call_every``; ``cancel()`` it from a task of its actor."""

    actor_id: bytes
    timer_id: int

    def cancel(self) -> bool:
        """Stop the timer (a firing already queued runs as a no-op); False if it was not active.
        A task of the actor that set it must call this: the cancellation is part of its state."""
        actor = _running_actor("Timer.cancel()")
        if actor.actor_id != self.actor_id:
            raise ActorRTError("a timer is cancelled by a task of the actor that set it")
        cancelled = actor.timer_table().cancel(self.timer_id)
        actor.timers.disarm(self.timer_id)
        return cancelled


def call_later(delay_s: float, method: Any, /, *args: Any, **kwargs: Any) -> Timer:
    """Call ``method(*args, **kwargs)`` of the running actor in ``delay_s`` seconds, as a task of
    its own: it queues behind the tasks already in the mailbox, never holds it, and its place in
    the actor's order is recorded, so a replay runs it at the same point. The due time is taken
    with ``now()``, so a replay sets the same timer.

    Args:
        delay_s: seconds from now (>= 0).
        method: a method of this actor: ``self.flush`` or ``handle.flush`` of its own handle.

    Returns:
        A ``Timer`` to cancel it with.
    """
    return _set_timer(delay_s, None, method, args, kwargs, "call_later()")


def call_every(period_s: float, method: Any, /, *args: Any, first_in: float | None = None, **kwargs: Any) -> Timer:
    """Call ``method(*args, **kwargs)`` of the running actor every ``period_s`` seconds (the first
    time after ``first_in``, by default one period), each call a task as with ``call_later``. An
    actor that falls behind skips the firings it missed rather than running them back to back.

    Returns:
        A ``Timer``; ``cancel()`` stops it.
    """
    if not period_s > 0:
        raise ValueError(f"call_every() needs a period > 0 s, not {period_s!r}")
    return _set_timer(period_s if first_in is None else first_in, period_s, method, args, kwargs, "call_every()")


def _set_timer(delay_s: float, period_s: float | None, method: Any, args: tuple, kwargs: dict, what: str) -> Timer:
    if not delay_s >= 0:
        raise ValueError(f"{what} needs a delay >= 0 s, not {delay_s!r}")
    actor = _running_actor(what)
    name = _method_name(actor, method, what)
    entry = TimerEntry(name, tuple(args), dict(kwargs), now() + delay_s, period_s, actor.running)
    timer_id = actor.timer_table().add(entry)
    actor.timers.arm(timer_id)
    return Timer(actor.actor_id, timer_id)


def _running_actor(what: str) -> Any:
    """The ``ActorInstance`` whose task is running (in this node process)."""
    sender = context.current_sender.get(None)
    task = context.running_task.get(None)
    actor = context.current().worker.host.actors.get(sender.sender_id) if sender is not None and task else None
    if actor is None:
        raise ActorRTError(f"{what} is for actor tasks: a timer fires as a task of the actor that set it "
                           f"(in a driver, use threading.Timer or asyncio)")
    return actor


def _method_name(actor: Any, method: Any, what: str) -> str:
    if isinstance(method, ActorMethod):
        if method._handle.actor_id != actor.actor_id:
            raise ActorRTError(f"{what} calls a method of the actor that sets the timer; to call another actor "
                               f"later, set a timer here whose method calls it")
        return method.name
    if getattr(method, "__self__", None) is actor.instance and hasattr(method, "__name__"):
        return method.__name__
    raise TypeError(f"{what} takes a method of this actor (self.method or its handle's), not {method!r}")

