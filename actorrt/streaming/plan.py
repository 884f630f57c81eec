"""The logical dataflow: what a user builds with ``Dataflow`` and ``Stream``, before it runs.

A dataflow is a graph of *stages*. A stage is what one set of operator instances runs: a source,
or inputs taken from other stages' ports; then a keyed step (a fold, a window, a join, a process
function), if any; then stateless steps (``map``, ``flat_map``, ``filter``, ``route``), as a tree
(two steps may take the same records); and ports, the outputs other stages take, collect or sink.
A record crosses processes only where it must change hands: at a keyed step (a shuffle by key)
and at a change of parallelism. Stages come after their inputs in ``Plan.stages``. Plans are
plain data, cloudpickled into the operators.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from actorrt.lineage.policies import LINEAGE_STASH, Policy

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


class Fed:
    """The source of a flow its driver feeds: ``flow.source(Fed())``, then ``flow.start()`` and
    ``RunningFlow.feed(records)`` as records come (``bridge.SPARK`` is one, for ``bridge.stream``)."""


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


# Processing time: how often a process step looks at the clock for its timers, and the bounds of
# how often state with a time-to-live does (a quarter of the ttl).
TIMER_TICK_S = 0.05
TTL_TICK_S = (0.005, 1.0)


def tick_s(step: Step | None) -> float | None:
    """How often a keyed step in processing time looks at the clock (None: it need not): a window
    to close windows at their ends, a process step for its timers, state with a time-to-live."""
    if step is None:
        return None
    if step.kind in ("window", "window_join"):
        return step.window.gap_s / 2 if isinstance(step.window, Session) else seconds(step.window.grid[0])
    ticks = [TIMER_TICK_S] if step.kind == "process" else []
    if step.ttl_s is not None:
        ticks.append(min(max(step.ttl_s / 4, TTL_TICK_S[0]), TTL_TICK_S[1]))
    return min(ticks) if ticks else None


def pulled(source: Any) -> bool:
    """Whether ``source`` is a pulled ``Source`` (connectors.py), read by its stage itself."""
    return callable(getattr(source, "next_range", None))


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


StepKind = Literal["map", "flat_map", "filter", "route", "select", "fold", "window", "window_join",
                   "interval_join", "process"]
KEYED = frozenset({"fold", "window", "window_join", "interval_join", "process"})
# A keyed step that acts at any time (timers, an interval join's eviction, a ttl) hears its
# producers' watermark, when they send it no records, once per this much event time (Flink sends
# one every 200 ms): a timer fires at most that late, and a batch of records carries it anyway.
TIMER_GRID = (100_000, 0)


@dataclass(frozen=True)
class Step:
    """One operation on records: stateless (``map``, ``flat_map``, ``filter``; ``route`` makes
    ``(output, record)`` pairs and each ``select`` takes one output's records), or keyed and
    stateful (``fold``, ``window``, the joins, ``process``), then first in its stage. ``after``:
    the step whose records this one takes (None: the stage's input, or its keyed step's output)."""

    kind: StepKind
    name: str
    fn: Callable[..., Any] | Any
    init: Callable[[], Any] | None = None  # the empty state of a keyed step
    window: Window | None = None
    on_error: OnError = "fail"
    lateness_s: float = 0.0  # event time: a window closes this long after the watermark passes its end
    merge: Callable[[Any, Any], Any] | None = None  # joins two sessions' states that a record bridges
    # A fold: every update, or each key's state at the end; a window join: pairs, or each window's groups.
    emit: Literal["updates", "final", "pairs", "groups"] = "updates"
    after: int | None = None
    ttl_s: float | None = None  # keyed state not written for this long (in the flow's time) is dropped
    between: tuple[float, float] = (0.0, 0.0)  # an interval join: (before, after) a left record's time
    outputs: tuple[str, ...] = ()  # a route: the names of its outputs


@dataclass
class Input:
    """Records a stage takes from port ``port`` of stage ``stage``: by ``key`` (each key to the
    instance that owns it), or in turn (None); ``side``: which input of a two-input step (0: left)."""

    stage: int
    port: int
    key: Callable[[Any], Any] | None = None
    side: int = 0


@dataclass
class Port:
    """An output of a stage: the records of step ``step`` (None: of the stage's input, or of its
    keyed step), kept under ``collect``, written to ``sink``, and sent to the stages that take it."""

    step: int | None
    collect: str | None = None
    sink: Any = None


@dataclass
class Stage:
    """What one set of operator instances runs: a source, or inputs taken from other stages'
    ports; a keyed step first (if any), then stateless steps (a tree: two steps may take the same
    records); and ports, the outputs others take."""

    parallelism: int
    inputs: list[Input] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    ports: list[Port] = field(default_factory=list)
    source: Any = None  # a source stage: records the driver reads, a pulled Source, or FED
    time: EventTime | None = None  # a source stage in event time: how it reads its records' times
    source_name: str | None = None
    standby: int = 0  # standbys of each operator instance (0 or 1)
    ft: Policy = LINEAGE_STASH  # its operators' fault-tolerance policy

    @property
    def name(self) -> str:
        return "->".join(s.name for s in self.steps) or (self.source_name or "source")

    @property
    def keyed(self) -> Step | None:
        """The stage's keyed step, first in it, if it has one."""
        first = self.steps[0] if self.steps else None
        return first if first is not None and first.kind in KEYED else None

    @property
    def windowed(self) -> Step | None:
        """The stage's window step (a window or a window join), if it starts with one."""
        keyed = self.keyed
        return keyed if keyed is not None and keyed.kind in ("window", "window_join") else None

    @property
    def is_source(self) -> bool:
        return not self.inputs

    def live_steps(self, first: int = 0) -> list[int]:
        """The steps from ``first`` on whose records reach a port, in order: a branch nobody
        takes does not run (its code could fail, or cost, for nothing)."""
        live = {port.step for port in self.ports}
        for i in range(len(self.steps) - 1, first - 1, -1):
            if i in live and self.steps[i].after is not None:
                live.add(self.steps[i].after)
        return [i for i in range(first, len(self.steps)) if i in live]

    def port(self, step: int | None) -> int:
        """The index of the port for step ``step``'s records (made if there is none)."""
        for i, port in enumerate(self.ports):
            if port.step == step:
                return i
        self.ports.append(Port(step))
        return len(self.ports) - 1


@dataclass
class Consumer:
    """Where one port's records go: ``stage`` takes them as its input ``input``, on channels from
    ``base`` (a sender's channel there is ``base`` + its instance)."""

    stage: int
    input: Input
    base: int


@dataclass
class Plan:
    name: str
    batch_size: int = 100
    stages: list[Stage] = field(default_factory=list)  # in an order where a stage comes after its inputs
    max_in_flight: int = 8  # batches a producer may have unprocessed at each consumer
    # Record lineage: the run's name in the lineage store (None: not captured), the stages that
    # capture it (None: all), and the newest records each instance keeps it for (None: all).
    lineage: str | None = None
    lineage_stages: frozenset[str] | None = None
    lineage_keep: int | None = None

    def captures(self, stage: int) -> bool:
        """Whether instances of ``stage`` capture record lineage."""
        return self.lineage is not None and (self.lineage_stages is None
                                             or self.stages[stage].name in self.lineage_stages)

    def numbers(self, stage: int) -> bool:
        """Whether instances of ``stage`` number what they emit: they capture record lineage, or
        a stage that takes their records does (it names them by those numbers)."""
        return self.captures(stage) or any(self.captures(c.stage) for port in self.consumers(stage) for c in port)

    def producer(self, stage: int, channel: int) -> tuple[int, int]:
        """The (stage, instance) that sends to ``stage`` on ``channel``."""
        base = 0
        for put in self.stages[stage].inputs:
            n = self.stages[put.stage].parallelism
            if channel < base + n:
                return put.stage, channel - base
            base += n
        raise IndexError(f"stage {stage} has no channel {channel}")

    @property
    def time(self) -> EventTime | None:
        """The first source's event time (None: the flow is in processing time)."""
        return next((stage.time for stage in self.stages if stage.is_source), None)

    @property
    def sources(self) -> list[int]:
        return [s for s, stage in enumerate(self.stages) if stage.is_source]

    def channels(self, stage: int) -> list[Input]:
        """The inputs of ``stage``, one per channel (a sending instance): channel ``c`` carries
        what the instance ``c`` minus its input's first channel of that input's stage sends."""
        return [put for put in self.stages[stage].inputs for _ in range(self.stages[put.stage].parallelism)]

    def consumers(self, stage: int) -> list[list[Consumer]]:
        """Per port of ``stage``: the stages that take its records."""
        out: list[list[Consumer]] = [[] for _ in self.stages[stage].ports]
        for s, later in enumerate(self.stages):
            base = 0
            for put in later.inputs:
                if put.stage == stage:
                    out[put.port].append(Consumer(s, put, base))
                base += self.stages[put.stage].parallelism
        return out

    def window_grid(self, stage: int) -> list[tuple[int, int]]:
        """Where the keyed steps of the stages after ``stage`` close windows or fire, as (period,
        offset) in µs of the watermark ``stage`` sends: an instance tells a consumer that got no
        records its watermark only when it crosses one of these (a window stage passes on its
        watermark less its lateness, and closes a window when its own passes the end plus the
        lateness; a step with timers of any time hears it every ``TIMER_GRID``)."""
        grid: set[tuple[int, int]] = set()
        todo = [(c.stage, 0) for port in self.consumers(stage) for c in port]
        seen = set()
        while todo:
            s, held_back = todo.pop()
            if (s, held_back) in seen:
                continue
            seen.add((s, held_back))
            step = self.stages[s].keyed
            lateness = 0
            if step is not None and step.kind in ("window", "window_join"):
                lateness = to_us(step.lateness_s)
                period, offset = step.window.grid
                grid.add((period, (offset + held_back + lateness) % period))
            elif step is not None and (step.kind in ("interval_join", "process") or step.ttl_s is not None):
                grid.add(TIMER_GRID)
            todo += [(c.stage, held_back + lateness) for port in self.consumers(s) for c in port]
        return sorted(grid)


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


def check_ttl(ttl_s: Any) -> float | None:
    if ttl_s is not None:
        _duration_us("ttl_s", ttl_s)
    return ttl_s


def check_window(window: Any) -> None:
    if not isinstance(window, (Tumbling, Sliding, Session)):
        raise TypeError(f"a window is Tumbling, Sliding or Session, not {window!r}")


def check_on_error(on_error: str) -> OnError:
    if on_error not in ("fail", "dead_letter"):
        raise ValueError(f"on_error must be 'fail' or 'dead_letter', not {on_error!r}")
    return on_error  # type: ignore[return-value]


def step_name(kind: str, fn: Callable[..., Any], name: str | None) -> str:
    return name or f"{kind}({getattr(fn, '__qualname__', type(fn).__name__)})"
