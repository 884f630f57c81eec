"""The logical dataflow: what a user builds with ``Dataflow`` and ``Stream``, before it runs.

A dataflow is a chain of *stages*. A stage is what one set of operator actors runs: the stateless
steps (``map``, ``flat_map``, ``filter``) fused after whatever starts the stage, so a record
crosses processes only where it must change hands: at a ``key_by`` (a shuffle by key, then a
keyed step) and at a change of parallelism. Plans are plain data, cloudpickled into the operators.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

OnError = Literal["fail", "dead_letter"]


# Times inside operators are integer microseconds: every record of a window computes the same
# bounds (in floats, stepping back by the slide gave one window two starts a rounding apart).
US = 1_000_000


def to_us(seconds: float) -> int:
    """``seconds`` as a whole number of microseconds (to the nearest)."""
    return round(seconds * US)


def _duration_us(what: str, seconds: Any) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real) or not math.isfinite(seconds):
        raise TypeError(f"{what} must be a number of seconds, not {seconds!r}")
    if to_us(seconds) < 1:
        raise ValueError(f"{what} must be at least 1 µs, not {seconds!r} s")
    return to_us(seconds)


@dataclass(frozen=True)
class Tumbling:
    """Windows of ``size_s`` seconds, aligned to the epoch: [k·size, (k+1)·size)."""

    size_s: float

    def __post_init__(self) -> None:
        _duration_us("a tumbling window's size", self.size_s)

    def starts(self, t: int) -> list[int]:
        """The starts of the windows that hold time ``t`` (µs)."""
        size = to_us(self.size_s)
        return [t - t % size]

    def end(self, start: int) -> int:
        """The end (µs, not in the window) of the window that starts at ``start``."""
        return start + to_us(self.size_s)

    @property
    def grid(self) -> tuple[int, int]:
        """(period, offset) in µs: windows end at k·period + offset."""
        return to_us(self.size_s), 0


@dataclass(frozen=True)
class Sliding:
    """Windows of ``size_s`` seconds every ``every_s`` (each time in about size/every of them)."""

    size_s: float
    every_s: float

    def __post_init__(self) -> None:
        _duration_us("a sliding window's size", self.size_s)
        _duration_us("a sliding window's slide", self.every_s)

    def starts(self, t: int) -> list[int]:
        size, every = to_us(self.size_s), to_us(self.every_s)
        last = t - t % every
        return list(range(last, t - size, -every))[::-1]

    def end(self, start: int) -> int:
        """The end (µs, not in the window) of the window that starts at ``start``."""
        return start + to_us(self.size_s)

    @property
    def grid(self) -> tuple[int, int]:
        every = to_us(self.every_s)
        return every, to_us(self.size_s) % every


@dataclass(frozen=True)
class Session:
    """Per key, records less than ``gap_s`` apart share a window; it ends ``gap_s`` after its last
    record."""

    gap_s: float

    def __post_init__(self) -> None:
        _duration_us("a session window's gap", self.gap_s)

    @property
    def gap_us(self) -> int:
        return to_us(self.gap_s)

    @property
    def grid(self) -> tuple[int, int]:
        return 1, 0  # a session may end at any microsecond: every move of the watermark counts


Window = Tumbling | Sliding | Session


def tick_s(window: Window) -> float:
    """How often a processing-time window looks for windows to close."""
    return window.gap_s / 2 if isinstance(window, Session) else seconds(window.grid[0])


def seconds(us: int) -> float:
    """``us`` microseconds in seconds."""
    return us / US


@dataclass(frozen=True)
class EventTime:
    """How a flow's records get their event time: ``Dataflow.source(records, time=EventTime(...))``.

    Each source instance takes ``of(record)`` (seconds since the epoch, or a ``datetime``) as it
    reads a record; the time travels with the record, and with whatever steps make of it. Each
    source instance makes a watermark, the time up to which its input is taken as complete: the
    newest time it has read, less ``max_delay_s`` (how far out of order records may come). Every
    other instance passes on the minimum of its inputs' watermarks, and windows close on it.

    With ``idle_s``, a source instance that has read nothing for that long is idle: it stops
    holding back the watermark of those downstream, and its own moves on with the clock, so
    windows close on a quiet input. A record it reads later may then be late; late records go to
    ``RunResult.late``, never silently away."""

    of: Callable[[Any], Any]
    max_delay_s: float = 0.0
    idle_s: float | None = None

    def __post_init__(self) -> None:
        if not callable(self.of):
            raise TypeError(f"EventTime takes a function giving a record's time, not {self.of!r}")
        _check_seconds("max_delay_s", self.max_delay_s)
        if self.idle_s is not None:
            _duration_us("idle_s", self.idle_s)


@dataclass(frozen=True)
class Step:
    """One operation on records: stateless (``map``, ``flat_map``, ``filter``), or keyed and
    stateful (``fold``: per key; ``window``: per key and window), then first in its stage."""

    kind: Literal["map", "flat_map", "filter", "fold", "window"]
    name: str
    fn: Callable[..., Any]
    init: Callable[[], Any] | None = None  # the empty state of a keyed step
    window: Window | None = None
    on_error: OnError = "fail"
    lateness_s: float = 0.0  # event time: a window closes this long after the watermark passes its end
    merge: Callable[[Any, Any], Any] | None = None  # joins two sessions' states that a record bridges
    emit: Literal["updates", "final"] = "updates"  # a fold: every update, or each key's state at the end


@dataclass
class Stage:
    parallelism: int
    key: Callable[[Any], Any] | None = None  # records enter by this key (hash-partitioned), else round robin
    steps: list[Step] = field(default_factory=list)

    @property
    def name(self) -> str:
        return "->".join(s.name for s in self.steps) or "source"

    @property
    def keyed(self) -> Step | None:
        """The stage's keyed step (``fold`` or ``window``), first in it, if it has one."""
        first = self.steps[0] if self.steps else None
        return first if first is not None and first.kind in ("fold", "window") else None

    @property
    def windowed(self) -> Step | None:
        """The stage's window step, if it starts with one."""
        keyed = self.keyed
        return keyed if keyed is not None and keyed.kind == "window" else None


@dataclass
class Plan:
    name: str
    source: Iterable[Any] | None = None  # read by the driver
    pulled: Any = None  # a Source (connectors.py) the first stage pulls from
    sink: Any = None  # a Sink (connectors.py) the last stage writes to
    batch_size: int = 100
    stages: list[Stage] = field(default_factory=list)
    max_in_flight: int = 8  # batches a producer may have unprocessed at each consumer
    time: EventTime | None = None  # None: windows are in processing time

    def window_grid(self, stage: int) -> list[tuple[int, int]]:
        """Where the windows of the stages after ``stage`` close, as (period, offset) in µs of the
        watermark ``stage`` sends: an instance tells a consumer that got no records its watermark
        only when it crosses one of these (a window stage passes on its watermark less its
        lateness, and closes a window when its own passes the end plus the lateness)."""
        grid, held_back = [], 0
        for later in self.stages[stage + 1:]:
            step = later.windowed
            if step is None:
                continue
            lateness = to_us(step.lateness_s)
            period, offset = step.window.grid
            grid.append((period, (offset + held_back + lateness) % period))
            held_back += lateness
        return grid


def check_parallelism(parallelism: int) -> int:
    if not isinstance(parallelism, int) or parallelism < 1:
        raise ValueError(f"parallelism must be an int >= 1, not {parallelism!r}")
    return parallelism


def _check_seconds(what: str, seconds_: Any) -> None:
    if isinstance(seconds_, bool) or not isinstance(seconds_, numbers.Real) or not 0 <= seconds_ < math.inf:
        raise ValueError(f"{what} must be a finite number of seconds >= 0, not {seconds_!r}")


def check_lateness(lateness_s: Any, event_time: bool) -> float:
    _check_seconds("lateness_s", lateness_s)
    if lateness_s and not event_time:
        raise ValueError("lateness_s is for windows in event time: give the flow's source time=EventTime(...)")
    return lateness_s


def check_on_error(on_error: str) -> OnError:
    if on_error not in ("fail", "dead_letter"):
        raise ValueError(f"on_error must be 'fail' or 'dead_letter', not {on_error!r}")
    return on_error  # type: ignore[return-value]


def step_name(kind: str, fn: Callable[..., Any], name: str | None) -> str:
    return name or f"{kind}({getattr(fn, '__qualname__', type(fn).__name__)})"
