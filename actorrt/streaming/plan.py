"""The logical dataflow: what a user builds with ``Dataflow`` and ``Stream``, before it runs.

A dataflow is a chain of *stages*. A stage is what one set of operator actors runs: the stateless
steps (``map``, ``flat_map``, ``filter``) fused after whatever starts the stage, so a record
crosses processes only where it must change hands: at a ``key_by`` (a shuffle by key, then a
keyed step) and at a change of parallelism. Plans are plain data, cloudpickled into the operators.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

OnError = Literal["fail", "dead_letter"]


@dataclass(frozen=True)
class Tumbling:
    """Processing-time windows of ``size_s`` seconds, aligned to the epoch: [k·size, (k+1)·size)."""

    size_s: float

    def __post_init__(self) -> None:
        if not self.size_s > 0:
            raise ValueError(f"a window needs a size > 0 s, not {self.size_s!r}")

    def windows_of(self, t: float) -> list[float]:
        """The starts of the windows a record arriving at ``t`` belongs to."""
        return [t - t % self.size_s]

    def end(self, start: float) -> float:
        return start + self.size_s

    @property
    def tick_s(self) -> float:
        """How often the operator looks for windows to close."""
        return self.size_s


@dataclass(frozen=True)
class Sliding:
    """Processing-time windows of ``size_s`` seconds every ``every_s`` (each record in size/every)."""

    size_s: float
    every_s: float

    def __post_init__(self) -> None:
        if not (self.size_s > 0 and self.every_s > 0):
            raise ValueError(f"a sliding window needs size and slide > 0 s, not {self.size_s!r}, {self.every_s!r}")

    def windows_of(self, t: float) -> list[float]:
        last = t - t % self.every_s
        starts = []
        start = last
        while start > t - self.size_s:
            starts.append(start)
            start -= self.every_s
        return sorted(starts)

    def end(self, start: float) -> float:
        return start + self.size_s

    @property
    def tick_s(self) -> float:
        return self.every_s


@dataclass(frozen=True)
class Session:
    """Per key, records less than ``gap_s`` apart (in the clock's time) share a window; it ends
    ``gap_s`` after its last record."""

    gap_s: float

    def __post_init__(self) -> None:
        if not self.gap_s > 0:
            raise ValueError(f"a session window needs a gap > 0 s, not {self.gap_s!r}")

    @property
    def tick_s(self) -> float:
        return self.gap_s / 2


Window = Tumbling | Sliding | Session


@dataclass(frozen=True)
class ProcessingTime:
    """A record's time is when its batch reached the operator (a recorded clock reading)."""


@dataclass(frozen=True)
class EventTime:
    """A record's time is ``of(record)`` (seconds). The watermark, the time up to which the
    operator takes its input as complete, is the newest record time that *every* upstream instance
    has sent, minus ``max_delay_s`` (an upstream held up, by a recovery for one, holds it back). A
    window closes when the watermark passes its end plus ``lateness_s``; a record for a window that
    closed already is late: it goes to ``RunResult.late``, not into any window.

    With ``idle_s``, an input idle that long moves the watermark on with the clock, so windows
    close without new records; a stall that long (a recovery upstream included) may then make
    records late: they are reported in ``RunResult.late``, never dropped silently."""

    of: Callable[[Any], float]
    max_delay_s: float = 0.0
    lateness_s: float = 0.0
    idle_s: float | None = None

    def __post_init__(self) -> None:
        if not callable(self.of):
            raise TypeError(f"EventTime takes a function giving a record's time, not {self.of!r}")
        if self.max_delay_s < 0 or self.lateness_s < 0 or (self.idle_s is not None and self.idle_s < 0):
            raise ValueError("max_delay_s, lateness_s and idle_s must be >= 0")


Clock = ProcessingTime | EventTime


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
    clock: Clock = ProcessingTime()
    merge: Callable[[Any, Any], Any] | None = None  # joins two sessions' states that a record bridges


@dataclass
class Stage:
    parallelism: int
    key: Callable[[Any], Any] | None = None  # records enter by this key (hash-partitioned), else round robin
    steps: list[Step] = field(default_factory=list)

    @property
    def name(self) -> str:
        return "->".join(s.name for s in self.steps) or "source"


@dataclass
class Plan:
    name: str
    source: Iterable[Any] | None = None  # read by the driver
    pulled: Any = None  # a Source (connectors.py) the first stage pulls from
    sink: Any = None  # a Sink (connectors.py) the last stage writes to
    batch_size: int = 100
    stages: list[Stage] = field(default_factory=list)
    max_in_flight: int = 8  # batches a producer may have unprocessed at each consumer


def check_parallelism(parallelism: int) -> int:
    if not isinstance(parallelism, int) or parallelism < 1:
        raise ValueError(f"parallelism must be an int >= 1, not {parallelism!r}")
    return parallelism


def check_on_error(on_error: str) -> OnError:
    if on_error not in ("fail", "dead_letter"):
        raise ValueError(f"on_error must be 'fail' or 'dead_letter', not {on_error!r}")
    return on_error  # type: ignore[return-value]


def step_name(kind: str, fn: Callable[..., Any], name: str | None) -> str:
    return name or f"{kind}({getattr(fn, '__qualname__', type(fn).__name__)})"
