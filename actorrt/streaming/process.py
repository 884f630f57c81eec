"""Keyed process functions: a step that sees each record with its key's state, and sets timers.

Flink's ``KeyedProcessFunction`` and ``KeyedCoProcessFunction``; Bytewax's ``stateful_map`` with
timers. A user subclasses ``KeyedProcess``; the stage calls it per record, and per timer, with a
``Context`` for the key at hand::

    class FirstBidAfterOpen(KeyedProcess):
        def on_left(self, ctx, auction):          # an auction opened: remember it until it closes
            ctx.state = auction
            ctx.timer(auction.expires)
        def on_right(self, ctx, bid):
            if ctx.state is not None:
                yield (ctx.key, bid)
        def on_timer(self, ctx, t):
            ctx.clear()                           # the key's state and timers go

Each method returns the records it emits (an iterable, or None). Timers are in the flow's time:
in event time a timer at ``t`` fires once the watermark passes ``t`` (no record at ``t`` or before
is to come; at the end of the input, every timer fires), in processing time once the recorded
clock reaches it (timers still set at the end of the input do not fire, as in Flink). A timer
that ``on_timer`` sets, due already, fires in the same sweep.

The object itself is the step's code, shared by every key: keep per-key data in ``ctx.state``,
which is checkpointed and rebuilt by replay like any keyed state.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from actorrt.streaming.plan import seconds, to_us
from actorrt.streaming.state import KeyedState


class KeyedProcess:
    """A keyed step's code: override what its inputs need (``on_record`` for one input,
    ``on_left`` and ``on_right`` for ``connect``, both ``on_record`` unless overridden)."""

    def init(self) -> Any:
        """A key's state before its first record (``ctx.state`` reads this until it is set)."""
        return None

    def on_record(self, ctx: Context, record: Any) -> Iterable[Any] | None:
        raise NotImplementedError(f"{type(self).__name__} takes records: define on_record (or on_left/on_right)")

    def on_left(self, ctx: Context, record: Any) -> Iterable[Any] | None:
        return self.on_record(ctx, record)

    def on_right(self, ctx: Context, record: Any) -> Iterable[Any] | None:
        return self.on_record(ctx, record)

    def on_timer(self, ctx: Context, t: float) -> Iterable[Any] | None:
        """A timer this key set for time ``t`` (seconds) fired."""
        return None


class Context:
    """The key a process function is called for, its state, and the time."""

    __slots__ = ("_state", "_init", "key", "time", "watermark", "_at")

    def __init__(self, state: KeyedState, init: Any, key: Any, at: int, t: int | None, watermark: float) -> None:
        self._state, self._init, self.key, self._at = state, init, key, at
        self.time = None if t is None else seconds(t)
        """The record's event time (the timer's, in ``on_timer``), seconds; None in processing time."""
        self.watermark = seconds(watermark)
        """The flow's time here: the watermark in event time (the clock in processing time), seconds."""

    @property
    def state(self) -> Any:
        """This key's state (``init()`` until set)."""
        values = self._state.values
        return values[self.key] if self.key in values else self._init()

    @state.setter
    def state(self, value: Any) -> None:
        self._state.put(self.key, value, self._at)

    def timer(self, t: float) -> None:
        """Call ``on_timer`` for this key once the flow's time passes ``t`` (seconds; a timer
        already passed fires at the next move of the time, or in this sweep of timers)."""
        self._state.set_timer(self.key, to_us(t))

    def clear(self) -> None:
        """Forget this key: its state and its timers."""
        self._state.clear(self.key)
