"""What one operator instance does to a batch of records: pure logic, no actors, no sockets.

Keyed state lives in plain dicts, iterated in insertion order, so a replay that feeds the same
batches at the same recorded times rebuilds it exactly. Time is an argument: the operator actor
passes recorded readings (``actorrt.now()``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from actorrt.exceptions import ActorRTError
from actorrt.streaming.plan import EventTime, Session, Stage, Step


class RecordError(ActorRTError):
    """An operator raised on a record (with ``on_error="fail"``, the default): the run stops."""


class OperatorStoppedError(ActorRTError):
    """The runtime stopped an operator: its replay after a failure did not reproduce what it had
    sent (it read something nondeterministic without a causal service, e.g. ``time.time()``
    instead of ``actorrt.now()``). The run stops; the message names the operator and the call."""


@dataclass
class DeadLetter:
    """A record an operator with ``on_error="dead_letter"`` could not take, and why."""

    operator: str
    record: Any
    error: str


@dataclass
class StageLogic:
    stage: Stage
    folds: dict[Any, Any] = field(default_factory=dict)  # key -> state (a fold step)
    windows: dict[tuple[float, Any], Any] = field(default_factory=dict)  # (window start, key) -> state
    sessions: dict[Any, list[list[Any]]] = field(default_factory=dict)  # key -> [start, last, state], by start
    dead_letters: list[DeadLetter] = field(default_factory=list)
    late: list[Any] = field(default_factory=list)  # records for windows that had closed
    upstreams: int = 1  # the instances that send to this one
    newest: dict[int, float] = field(default_factory=dict)  # event time: the newest record time per upstream
    last_arrival: float = -math.inf  # the clock reading when the last record came

    @property
    def keyed(self) -> Step | None:
        first = self.stage.steps[0] if self.stage.steps else None
        return first if first is not None and first.kind in ("fold", "window") else None

    @property
    def windowed(self) -> Step | None:
        """The stage's window step, if it starts with one (the only step that reads the clock)."""
        keyed = self.keyed
        return keyed if keyed is not None and keyed.kind == "window" else None

    def process(self, batch: list[Any], now: float, upstream: int = 0) -> list[Any]:
        """The records ``batch`` (from upstream instance ``upstream``, arrived at ``now``) makes
        this stage emit."""
        keyed = self.keyed
        if keyed is None:
            return self._stateless(batch, 0)
        if keyed.kind == "fold":
            return self._stateless(self._fold(keyed, batch), 1)
        self._into_windows(keyed, batch, now, upstream)
        return self.close(now)

    def upstream_done(self, upstream: int) -> None:
        """``upstream`` sends nothing more: it no longer holds the watermark back."""
        self.newest[upstream] = math.inf

    def watermark(self, now: float) -> float:
        """The time up to which the input is taken as complete: ``now`` in processing time."""
        windowed = self.windowed
        clock = windowed.clock if windowed is not None else None
        if not isinstance(clock, EventTime):
            return now
        times = [self.newest.get(u, -math.inf) for u in range(self.upstreams)]
        mark = min(times) - clock.max_delay_s
        idle = now - self.last_arrival
        if clock.idle_s is not None and idle > clock.idle_s:
            seen = [t for t in times if math.isfinite(t)]
            if seen:
                mark = max(mark, max(seen) - clock.max_delay_s + idle - clock.idle_s)
        return mark

    def close(self, now: float) -> list[Any]:
        """Windows the watermark at ``now`` has passed, emitted as ``(key, start, end, state)``."""
        windowed = self.windowed
        if windowed is None:
            return []
        return self._stateless(self._closed(windowed, self.watermark(now) - _lateness(windowed)), 1)

    def finish(self) -> list[Any]:
        """The end of the input: every open window closes."""
        windowed = self.windowed
        if windowed is None:
            return []
        return self._stateless(self._closed(windowed, math.inf), 1)

    def _closed(self, step: Step, before: float) -> list[tuple[Any, float, float, Any]]:
        """Windows ending at or before ``before``, taken out, in (start, key) order."""
        if isinstance(step.window, Session):
            out = []
            for key in list(self.sessions):
                keep = []
                for start, last, state in self.sessions[key]:
                    if last + step.window.gap_s <= before:
                        out.append((key, start, last + step.window.gap_s, state))
                    else:
                        keep.append([start, last, state])
                if keep:
                    self.sessions[key] = keep
                else:
                    del self.sessions[key]
            return sorted(out, key=lambda w: (w[1], repr(w[0])))
        done = sorted((k for k in self.windows if step.window.end(k[0]) <= before), key=_order)
        return [(key, start, step.window.end(start), self.windows.pop((start, key))) for start, key in done]

    def _fold(self, step: Step, batch: list[Any]) -> list[tuple[Any, Any]]:
        changed: dict[Any, None] = {}
        for record in batch:
            key = self.stage.key(record)
            state = self.folds[key] if key in self.folds else step.init()
            ok, state = self._apply(step, step.fn, state, record)
            if ok:
                self.folds[key] = state
                changed[key] = None
        return [(key, self.folds[key]) for key in changed]

    def _into_windows(self, step: Step, batch: list[Any], now: float, upstream: int) -> None:
        closed_before = self.watermark(now) - _lateness(step)  # windows ending by then were emitted
        event_time = isinstance(step.clock, EventTime)
        for record in batch:
            key = self.stage.key(record)
            if event_time:
                ok, t = self._apply(step, step.clock.of, record)
                if not ok:
                    continue
            else:
                t = now
            if isinstance(step.window, Session):
                if t + step.window.gap_s <= closed_before:
                    self.late.append(record)
                else:
                    self._into_session(step, key, t, record)
            else:
                starts = [start for start in step.window.windows_of(t) if step.window.end(start) > closed_before]
                if not starts:
                    self.late.append(record)
                for start in starts:
                    k = (start, key)
                    ok, state = self._apply(step, step.fn, self.windows[k] if k in self.windows else step.init(),
                                            record)
                    if ok:
                        self.windows[k] = state
            if event_time and t > self.newest.get(upstream, -math.inf):
                self.newest[upstream] = t
        self.last_arrival = now

    def _into_session(self, step: Step, key: Any, t: float, record: Any) -> None:
        gap = step.window.gap_s
        sessions = self.sessions.setdefault(key, [])
        near = [s for s in sessions if s[0] - gap < t < s[1] + gap]
        ok, state = self._apply(step, step.fn, near[0][2] if near else step.init(), record)
        if not ok:
            if not sessions:
                del self.sessions[key]
            return
        if not near:
            sessions.append([t, t, state])
            sessions.sort(key=lambda s: s[0])
            return
        first = near[0]
        first[0], first[1], first[2] = min(first[0], t), max(first[1], t), state
        for other in near[1:]:  # the record bridges sessions: they become one
            first[0], first[1] = min(first[0], other[0]), max(first[1], other[1])
            first[2] = step.merge(first[2], other[2])
            sessions.remove(other)

    def _stateless(self, records: list[Any], first: int) -> list[Any]:
        for step in self.stage.steps[first:]:
            out: list[Any] = []
            for record in records:
                ok, value = self._apply(step, step.fn, record)
                if not ok:
                    continue
                if step.kind == "map":
                    out.append(value)
                elif step.kind == "flat_map":
                    out.extend(value)
                elif value:
                    out.append(record)
            records = out
        return records

    def _apply(self, step: Step, fn: Any, *args: Any) -> tuple[bool, Any]:
        record = args[-1]
        try:
            return True, fn(*args)
        except Exception as exc:  # noqa: BLE001 - a user function: its policy says what happens
            if step.on_error == "dead_letter":
                self.dead_letters.append(DeadLetter(step.name, record, f"{type(exc).__name__}: {exc}"))
                return False, None
            raise RecordError(f"operator {step.name} raised {type(exc).__name__} on record {record!r}: {exc}") from exc


def _lateness(step: Step) -> float:
    return step.clock.lateness_s if isinstance(step.clock, EventTime) else 0.0


def _order(k: tuple[float, Any]) -> tuple[float, str]:
    return k[0], repr(k[1])
