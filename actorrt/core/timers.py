"""An actor's timers: each firing a task in the actor's order, recorded and replayed like any.

``actorrt.call_later`` and ``actorrt.call_every`` register a timer in the running task; the table
of timers is part of the actor's state (``SenderContext.extras``, so checkpoints keep it), and so
is every change to it, which tasks make: registering, cancelling, firing. Only arming the clock
is not: when a timer is due, the node sends the actor a task, ``__actorrt_timer__(timer, n)``,
from a sender of the timer's own (its n-th call). That task is logged like any other, and its place
in the actor's order is recorded where senders interleave, so a replay runs each firing exactly
where the lost run did. Its ID derives from (actor, timer, n): a firing sent again after a
recovery is the same task, which the actor's ledger runs at most once.

A timer never holds the mailbox: the wait is a callback of the event loop, and the firing queues
behind the tasks already there. While the actor replays, no clock is armed; when the replay is
over, every timer still active is armed for its next firing (at once, if it is overdue).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# The task a due timer sends its actor: ``__actorrt_timer__(timer_id, n)``.
TIMER_METHOD = "__actorrt_timer__"
# Where an actor's timer table lives in ``SenderContext.extras``.
TIMERS_EXTRA = "actorrt.timers"


@dataclass
class TimerEntry:
    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    due: float  # wall-clock time of the next firing (from a recorded reading)
    period: float | None  # None: fires once
    registered_by: bytes  # the task that set it: the parent of its firings
    fired: int = 0  # firings run so far


@dataclass
class TimerTable:
    """An actor's timers: changed only by its tasks, so replay rebuilds it exactly."""

    entries: dict[int, TimerEntry] = field(default_factory=dict)
    created: int = 0

    def add(self, entry: TimerEntry) -> int:
        self.created += 1
        self.entries[self.created] = entry
        return self.created

    def cancel(self, timer_id: int) -> bool:
        return self.entries.pop(timer_id, None) is not None

    def take_firing(self, timer_id: int, n: int, now: Callable[[], float]) -> TimerEntry | None:
        """Firing ``n`` of ``timer_id`` runs now: its entry, advanced past it; None if the timer
        was cancelled or this firing ran already. A periodic timer's next firing is one period
        later, or, if the actor fell behind by more, the next period boundary after ``now()``
        (missed firings are skipped, not bunched)."""
        entry = self.entries.get(timer_id)
        if entry is None or n != entry.fired + 1:
            return None
        entry.fired = n
        if entry.period is None:
            del self.entries[timer_id]
            return entry
        entry.due += entry.period
        late = now() - entry.due
        if late > 0:
            entry.due += entry.period * (int(late // entry.period) + 1)
        return entry


class ActorTimers:
    """The clocks armed for one actor's timers (runtime only: nothing here is replayed).

    ``send_firing(timer_id, n)`` sends the actor the task of firing ``n``.
    """

    def __init__(self, table: Callable[[], TimerTable], send_firing: Callable[[int, int], None]) -> None:
        self._table = table
        self._send_firing = send_firing
        self._armed: dict[int, asyncio.TimerHandle] = {}
        self.live = True  # False while the actor is being rebuilt: its timers wait for the replay's end

    def arm(self, timer_id: int) -> None:
        """Arm the next firing of ``timer_id`` (now in the table), replacing what was armed."""
        self.disarm(timer_id)
        entry = self._table().entries.get(timer_id)
        if not self.live or entry is None:
            return
        delay = max(0.0, entry.due - time.time())
        self._armed[timer_id] = asyncio.get_running_loop().call_later(delay, self._due, timer_id, entry.fired + 1)

    def disarm(self, timer_id: int) -> None:
        handle = self._armed.pop(timer_id, None)
        if handle is not None:
            handle.cancel()

    def resume(self) -> None:
        """The replay is over: arm every timer still active."""
        self.live = True
        for timer_id in list(self._table().entries):
            self.arm(timer_id)

    def stop(self) -> None:
        for timer_id in list(self._armed):
            self.disarm(timer_id)

    def _due(self, timer_id: int, n: int) -> None:
        self._armed.pop(timer_id, None)
        self._send_firing(timer_id, n)
