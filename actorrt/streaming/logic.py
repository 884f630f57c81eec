"""What one operator instance does to a batch of records: pure logic, no actors, no sockets.

Keyed state lives in plain dicts, iterated in insertion order, so a replay that feeds the same
batches at the same recorded times rebuilds it exactly. Time is an argument: the operator actor
passes recorded readings (``actorrt.now()``). In event time every record travels with its time
(integer µs), and the instance's watermark is in ``progress`` (``progress.py``).
"""

from __future__ import annotations

import datetime
import math
import numbers
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from actorrt.exceptions import ActorRTError
from actorrt.streaming.plan import EventTime, Session, Stage, Step, seconds, to_us
from actorrt.streaming.progress import InputProgress, SourceProgress


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


class Out(NamedTuple):
    """Records a step emits, with their event times (µs; None in processing time)."""

    records: list[Any]
    times: list[int] | None

    def then(self, more: Out) -> Out:
        """These records, then ``more``."""
        if not more.records:
            return self
        return Out(self.records + more.records, None if self.times is None else self.times + more.times)


@dataclass
class StageLogic:
    """One instance of a stage: its keyed state, its windows, and, in event time, its watermark."""

    stage: Stage
    time: EventTime | None = None  # the flow's event time (None: windows in processing time)
    upstreams: int = 1  # the instances that send to this one (the driver or the source counts as one)
    source: bool = False  # the flow's first stage: it reads records, and makes the watermark
    folds: dict[Any, Any] = field(default_factory=dict)  # key -> state (a fold step)
    fold_times: dict[Any, int] = field(default_factory=dict)  # key -> newest record time (a final-only fold)
    windows: dict[tuple[int, Any], Any] = field(default_factory=dict)  # (window start in µs, key) -> state
    sessions: dict[Any, list[list[Any]]] = field(default_factory=dict)  # key -> [start, last, state], by start
    dead_letters: list[DeadLetter] = field(default_factory=list)
    late: list[Any] = field(default_factory=list)  # records for windows that had closed
    progress: SourceProgress | InputProgress | None = None  # event time: the watermark

    def __post_init__(self) -> None:
        if self.time is not None and self.progress is None:
            self.progress = SourceProgress(self.time) if self.source else InputProgress(self.upstreams)

    @property
    def watermark_out(self) -> tuple[float, bool] | None:
        """The watermark this instance gives its consumers (its own; a window stage's less its
        lateness, so that what it emits is not late downstream) and whether it is idle; None in
        processing time."""
        if self.progress is None:
            return None
        windowed = self.stage.windowed
        return self.progress.mark - (to_us(windowed.lateness_s) if windowed else 0), self.progress.idle

    def process(self, batch: list[Any], now: float, upstream: int = 0, times: list[int] | None = None,
                mark: float | None = None, idle: bool = False) -> Out:
        """What ``batch`` makes this stage emit: from upstream instance ``upstream``, arrived at
        ``now``, its records at ``times``, and the sender's watermark ``mark`` after them (and
        whether the sender is idle: a window stage whose inputs are all idle closes windows)."""
        if self.source and self.time is not None:
            times = [self._time_of(record) for record in batch]
        keyed = self.stage.keyed
        if keyed is None:
            out = self._stateless(batch, times, 0)
        elif keyed.kind == "fold":
            out = self._stateless(*self._fold(keyed, batch, times), 1)
        else:
            self._into_windows(keyed, batch, times, now)
            out = self._nothing()
        if isinstance(self.progress, SourceProgress):
            self.progress.read(times)
        elif self.progress is not None and mark is not None:
            self.progress.update(upstream, mark, idle)
        return out.then(self.close(now)) if keyed is not None and keyed.kind == "window" else out

    def advance(self, upstream: int, mark: float, idle: bool, now: float) -> Out:
        """Upstream ``upstream``'s watermark moved to ``mark`` (a message without records)."""
        self.progress.update(upstream, mark, idle)
        return self.close(now)

    def tick(self, now: float) -> Out:
        """The clock: a source instance may become idle, a processing-time window ends."""
        if isinstance(self.progress, SourceProgress):
            self.progress.check_idle(now)
        return self.close(now)

    def upstream_done(self, upstream: int, now: float) -> Out:
        """``upstream`` sends nothing more: it no longer holds the watermark back."""
        if isinstance(self.progress, SourceProgress):
            self.progress.finish()
        elif self.progress is not None:
            self.progress.finish(upstream)
        return self.close(now)

    def close(self, now: float) -> Out:
        """Windows that are complete (in processing time: ended by ``now``), emitted as ``(key,
        start, end, state)``."""
        windowed = self.stage.windowed
        if windowed is None:
            return self._nothing()
        if self.progress is None:
            return self._stateless(*self._closed(windowed, to_us(now)), 1)
        return self._stateless(*self._closed(windowed, self.progress.mark - to_us(windowed.lateness_s)), 1)

    def finish(self) -> Out:
        """The end of the input: every open window closes, a final-only fold emits its keys."""
        keyed = self.stage.keyed
        if keyed is not None and keyed.kind == "fold" and keyed.emit == "final":
            keys = sorted(self.folds, key=repr)
            times = None if self.time is None else [self.fold_times[key] for key in keys]
            return self._stateless([(key, self.folds[key]) for key in keys], times, 1)
        windowed = self.stage.windowed
        if windowed is None:
            return self._nothing()
        return self._stateless(*self._closed(windowed, math.inf), 1)

    def _nothing(self) -> Out:
        return Out([], None if self.time is None else [])

    def _time_of(self, record: Any) -> int:
        try:
            value = self.time.of(record)
            if isinstance(value, datetime.datetime):
                value = value.timestamp()
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
                raise TypeError(f"it gave {value!r}: a time is seconds since the epoch (a number) or a datetime")
            return to_us(value)
        except Exception as exc:  # noqa: BLE001 - a user function: the run stops with the record
            raise RecordError(f"EventTime.of raised {type(exc).__name__} on record {record!r}: {exc}") from exc

    def _closed(self, step: Step, before: float) -> Out:
        """Windows ending at or before ``before`` (µs), taken out, in (start, key) order; each
        emitted at its last instant."""
        if isinstance(step.window, Session):
            gap = step.window.gap_us
            out = []
            for key in list(self.sessions):
                keep = []
                for start, last, state in self.sessions[key]:
                    if last + gap <= before:
                        out.append((key, start, last + gap, state))
                    else:
                        keep.append([start, last, state])
                if keep:
                    self.sessions[key] = keep
                else:
                    del self.sessions[key]
            out.sort(key=lambda w: (w[1], repr(w[0])))
        else:
            done = sorted((k for k in self.windows if step.window.end(k[0]) <= before), key=_order)
            out = [(key, start, step.window.end(start), self.windows.pop((start, key))) for start, key in done]
        return Out([(key, seconds(start), seconds(end), state) for key, start, end, state in out],
                   None if self.time is None else [end - 1 for _, _, end, _ in out])

    def _fold(self, step: Step, batch: list[Any], times: list[int] | None) -> Out:
        changed: dict[Any, float] = {}  # key -> the newest time among its records here
        for i, record in enumerate(batch):
            key = self.stage.key(record)
            state = self.folds[key] if key in self.folds else step.init()
            ok, state = self._apply(step, step.fn, state, record)
            if ok:
                self.folds[key] = state
                changed[key] = max(changed.get(key, -math.inf), times[i]) if times is not None else 0
        if step.emit == "final":  # (at the end of the input: finish)
            if times is not None:
                for key, t in changed.items():
                    self.fold_times[key] = max(self.fold_times.get(key, t), t)
            return self._nothing()
        return Out([(key, self.folds[key]) for key in changed], None if times is None else list(changed.values()))

    def _into_windows(self, step: Step, batch: list[Any], times: list[int] | None, now: float) -> None:
        if times is None:  # processing time: every record of the batch arrived now (never late)
            times, closed_before = [to_us(now)] * len(batch), -math.inf
        else:  # windows ending by then were emitted
            closed_before = self.progress.mark - to_us(step.lateness_s)
        for record, t in zip(batch, times, strict=True):
            key = self.stage.key(record)
            if isinstance(step.window, Session):
                if t + step.window.gap_us <= closed_before:
                    self.late.append(record)
                else:
                    self._into_session(step, key, t, record)
                continue
            windows = step.window.starts(t)  # none: in a gap between sliding windows (a slide above the size)
            starts = [start for start in windows if step.window.end(start) > closed_before]
            if windows and not starts:
                self.late.append(record)
            for start in starts:
                k = (start, key)
                ok, state = self._apply(step, step.fn, self.windows[k] if k in self.windows else step.init(), record)
                if ok:
                    self.windows[k] = state

    def _into_session(self, step: Step, key: Any, t: int, record: Any) -> None:
        gap = step.window.gap_us
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

    def _stateless(self, records: list[Any], times: list[int] | None, first: int) -> Out:
        """The stage's stateless steps from step ``first`` on; a record's time goes with what it
        becomes (the records of a ``flat_map`` all take it)."""
        for step in self.stage.steps[first:]:
            out: list[Any] = []
            out_times: list[int] | None = None if times is None else []
            for i, record in enumerate(records):  # the hot loop of every stage: one branch per record
                ok, value = self._apply(step, step.fn, record)
                if not ok:
                    continue
                if step.kind == "map":
                    out.append(value)
                    n = 1
                elif step.kind == "flat_map":
                    out.extend(value)
                    n = len(value)
                elif value:
                    out.append(record)
                    n = 1
                else:
                    continue
                if out_times is not None:
                    out_times.extend((times[i],) * n)
            records, times = out, out_times
        return Out(records, times)

    def _apply(self, step: Step, fn: Any, *args: Any) -> tuple[bool, Any]:
        record = args[-1]
        try:
            return True, fn(*args)
        except Exception as exc:  # noqa: BLE001 - a user function: its policy says what happens
            if step.on_error == "dead_letter":
                self.dead_letters.append(DeadLetter(step.name, record, f"{type(exc).__name__}: {exc}"))
                return False, None
            raise RecordError(f"operator {step.name} raised {type(exc).__name__} on record {record!r}: {exc}") from exc


def _order(k: tuple[int, Any]) -> tuple[int, str]:
    return k[0], repr(k[1])
