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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from actorrt.exceptions import ActorRTError
from actorrt.lineage.records import CHANNEL0, SOURCE
from actorrt.streaming.joins import IntervalJoin, window_join_pairs
from actorrt.streaming.plan import EventTime, Input, Plan, Session, Stage, Step, seconds, to_us
from actorrt.streaming.process import Context
from actorrt.streaming.progress import DONE, InputProgress, SourceProgress
from actorrt.streaming.provenance import FoldHistory
from actorrt.streaming.state import KeyedState


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
    """Records a step emits, with their event times (µs; None in processing time) and, where
    record lineage is captured, where each came from (``provenance.py``; else None)."""

    records: list[Any]
    times: list[int] | None
    origins: list[Any] | None = None

    def then(self, more: Out) -> Out:
        """These records, then ``more``."""
        if not more.records:
            return self
        return Out(self.records + more.records, None if self.times is None else self.times + more.times,
                   None if self.origins is None else self.origins + more.origins)


@dataclass
class StageLogic:
    """One instance of a stage: its keyed state, its windows, and, in event time, its watermark.
    Each call returns what the stage emits on each of its ports (``Stage.ports``), in their order."""

    stage: Stage
    time: EventTime | None = None  # a source's own event time; elsewhere the flow's (None: processing time)
    channels: list[Input] = field(default_factory=list)  # the input each upstream channel belongs to
    state: KeyedState = field(default_factory=KeyedState)  # key -> state (a fold, a process step)
    fold_times: dict[Any, int] = field(default_factory=dict)  # key -> newest record time (a final-only fold)
    windows: dict[tuple[int, Any], Any] = field(default_factory=dict)  # (window start in µs, key) -> state
    sessions: dict[Any, list[list[Any]]] = field(default_factory=dict)  # key -> [start, last, state], by start
    joined: IntervalJoin | None = None  # an interval join's kept records
    dead_letters: list[DeadLetter] = field(default_factory=list)
    late: list[Any] = field(default_factory=list)  # records for windows that had closed
    progress: SourceProgress | InputProgress | None = None  # event time: the watermark
    capture: bool = False  # record lineage: say where each emitted record came from
    history: FoldHistory = field(default_factory=FoldHistory)  # a fold's keys' histories (capture)
    window_origins: dict[tuple[int, Any], list[tuple[int, int]]] = field(default_factory=dict)  # (capture)

    def __post_init__(self) -> None:
        step = self.stage.keyed
        if self.time is not None and self.progress is None:
            self.progress = SourceProgress(self.time) if self.stage.is_source else InputProgress(self.upstreams)
        if step is not None and step.ttl_s is not None:
            self.state.ttl_us = to_us(step.ttl_s)
        if step is not None and step.kind == "interval_join" and self.joined is None:
            self.joined = IntervalJoin(*(to_us(bound) for bound in step.between))
        self._live = self.stage.live_steps(1 if step is not None else 0)  # the steps _ports runs
        self._code, self._seqs = SOURCE, ()  # the sender and IDs of the batch being processed (capture)
        self._connected = any(put.side for put in self.channels)  # two inputs: on_left and on_right

    @classmethod
    def of(cls, plan: Plan, stage: int, inputs: list[int] | None = None) -> StageLogic:
        """The logic of one instance of ``plan``'s stage ``stage``; ``inputs``: the input each of
        its channels belongs to, where rescales appended channels (else the plan's)."""
        own = plan.stages[stage]
        channels = plan.channels(stage) if inputs is None else [own.inputs[k] for k in inputs]
        return cls(own, own.time if own.is_source else plan.time, channels)

    def sender_code(self, upstream: int) -> int:
        """How record lineage names the sender on channel ``upstream`` (``records.CHANNEL0``)."""
        return SOURCE if self.stage.is_source else CHANNEL0 + upstream

    @property
    def upstreams(self) -> int:
        """The instances that send to this one (the driver or the source counts as one)."""
        return len(self.channels) or 1

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
                mark: float | None = None, idle: bool = False, seqs: Sequence[int] = ()) -> list[Out]:
        """What ``batch`` makes this stage emit: from upstream channel ``upstream``, arrived at
        ``now``, its records at ``times``, and the sender's watermark ``mark`` after them (and
        whether the sender is idle: a window stage whose inputs are all idle closes windows);
        ``seqs``: the records' IDs (capturing lineage)."""
        if self.stage.is_source and self.time is not None:
            times = [self._time_of(record) for record in batch]
        self._code, self._seqs = self.sender_code(upstream), seqs
        step = self.stage.keyed
        if step is None:
            out = Out(batch, times, list(range(len(batch))) if self.capture else None)
        else:
            out = self._keyed(step, batch, times, upstream, now)
        if isinstance(self.progress, SourceProgress):
            self.progress.read(times)
        elif self.progress is not None and mark is not None:
            self.progress.update(upstream, mark, idle)
        return self._ports(out if step is None else out.then(self._on_time(now)))

    def advance(self, upstream: int, mark: float, idle: bool, now: float) -> list[Out]:
        """Upstream ``upstream``'s watermark moved to ``mark`` (a message without records)."""
        self.progress.update(upstream, mark, idle)
        return self.close(now)

    def tick(self, now: float) -> list[Out]:
        """The clock: a source instance may become idle, processing-time windows and timers end."""
        if isinstance(self.progress, SourceProgress):
            self.progress.check_idle(now)
        return self.close(now)

    def upstream_done(self, upstream: int, now: float) -> list[Out]:
        """``upstream`` sends nothing more: it no longer holds the watermark back."""
        if isinstance(self.progress, SourceProgress):
            self.progress.finish()
        elif self.progress is not None:
            self.progress.finish(upstream)
        return self.close(now)

    def close(self, now: float) -> list[Out]:
        """What the time ``now`` (in event time: the watermark) makes due: windows that ended, as
        ``(key, start, end, state)``, timers, state past its time-to-live."""
        return self._ports(self._on_time(now))

    def finish(self) -> list[Out]:
        """The end of the input: every open window closes, a final-only fold emits its keys."""
        keyed = self.stage.keyed
        if keyed is not None and keyed.kind == "fold" and keyed.emit == "final":
            keys = sorted(self.state.values, key=repr)
            times = None if self.time is None else [self.fold_times[key] for key in keys]
            origins = None
            if self.capture:
                history = self.history
                origins = [history.so_far(key) for key in keys]
            return self._ports(Out([(key, self.state.values[key]) for key in keys], times, origins))
        windowed = self.stage.windowed
        if windowed is None:
            return self._ports(self._nothing())
        return self._ports(self._closed(windowed, math.inf))

    def _keyed(self, step: Step, batch: list[Any], times: list[int] | None, upstream: int, now: float) -> Out:
        """The keyed step on ``batch`` from channel ``upstream`` (by the key of that input)."""
        put = self.channels[upstream]
        keys = [put.key(record) for record in batch]
        if step.kind == "fold":
            return self._fold(step, batch, times, keys, now)
        if step.kind == "interval_join":
            return self._interval(batch, times, keys, put.side)
        if step.kind == "process":
            fn = step.fn
            method = fn.on_record if not self._connected else fn.on_left if put.side == 0 else fn.on_right
            at = to_us(now)
            # Capturing lineage, each record is an entry of its key's history (it may change the
            # key's state), and what the call emits comes of the key's records so far.
            return self._called(step, method, [(keys[i], at if times is None else times[i], record)
                                               for i, record in enumerate(batch)],
                                self.progress.mark if self.progress is not None else at,
                                (lambda i, key: self.history.fold(key, [i])) if self.capture else None)
        self._into_windows(step, batch if step.kind == "window" else [(put.side, r) for r in batch], times, now, keys)
        return self._nothing()

    def _on_time(self, now: float) -> Out:
        step = self.stage.keyed
        if step is None:
            return self._nothing()
        now_us = to_us(now) if self.progress is None else self.progress.mark
        if step.kind in ("window", "window_join"):
            return self._closed(step, now_us if self.progress is None else now_us - to_us(step.lateness_s))
        if step.kind == "interval_join":
            self.joined.evict(now_us)
            return self._nothing()
        out = self._timers(step, now_us) if step.kind == "process" else self._nothing()
        if self.state.ttl_us is not None and now_us != DONE:  # (at the end, a final fold still emits its keys)
            for key in self.state.expire(now_us):
                self.fold_times.pop(key, None)
                self.history.forget(key)  # its state starts afresh: so does what it comes of
        return out

    def _nothing(self) -> Out:
        return Out([], None if self.time is None else [], [] if self.capture else None)

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
        emitted at its last instant (a window join's: each pair of its records)."""
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
            if self.capture:
                return self._closed_with_origins(step, out, [self.window_origins.pop(k, None) for k in done])
        if step.kind == "window_join" and step.emit == "groups":
            return Out([(key, seconds(start), seconds(end), *state) for key, start, end, state in out],
                       None if self.time is None else [end - 1 for _, _, end, _ in out])
        if step.kind == "window_join":
            records = [(pair, end - 1) for key, _, end, state in out for pair in window_join_pairs(key, state)]
            return Out([pair for pair, _ in records], None if self.time is None else [t for _, t in records])
        return Out([(key, seconds(start), seconds(end), state) for key, start, end, state in out],
                   None if self.time is None else [end - 1 for _, _, end, _ in out])

    def _closed_with_origins(self, step: Step, out: list[Any], origins: list[Any]) -> Out:
        """``_closed``'s windows, each with the records it holds (a join's pair: its two)."""
        times = None if self.time is None else [end - 1 for _, _, end, _ in out]
        if step.kind != "window_join":
            return Out([(key, seconds(start), seconds(end), state) for key, start, end, state in out], times,
                       [o or [] for o in origins])
        if step.emit == "groups":
            return Out([(key, seconds(start), seconds(end), *state) for key, start, end, state in out], times,
                       [lefts + rights for lefts, rights in (o or ([], []) for o in origins)])
        records, pair_times, pair_origins = [], [], []
        for (key, _, end, state), (lefts, rights) in zip(out, (o or ([], []) for o in origins), strict=True):
            records += window_join_pairs(key, state)
            pair_origins += [[left, right] for left in lefts for right in rights]
            pair_times += [end - 1] * (len(lefts) * len(rights))
        return Out(records, None if self.time is None else pair_times, pair_origins)

    def _fold(self, step: Step, batch: list[Any], times: list[int] | None, keys: list[Any], now: float) -> Out:
        changed: dict[Any, float] = {}  # key -> the newest time among its records here
        folds = self.state.values
        taken: dict[Any, list[int]] | None = {} if self.capture else None  # key -> positions folded in
        for i, record in enumerate(batch):
            key = keys[i]
            state = folds[key] if key in folds else step.init()
            ok, state = self._apply(step, step.fn, state, record)
            if ok:
                t = times[i] if times is not None else 0
                self.state.put(key, state, t if times is not None else to_us(now))
                changed[key] = max(changed.get(key, -math.inf), t)
                if taken is not None:
                    taken.setdefault(key, []).append(i)
        origins = None if taken is None else [self.history.fold(key, positions) for key, positions in taken.items()]
        if step.emit == "final":  # (at the end of the input: finish)
            if times is not None:
                for key, t in changed.items():
                    self.fold_times[key] = max(self.fold_times.get(key, t), t)
            return self._nothing()
        return Out([(key, folds[key]) for key in changed], None if times is None else list(changed.values()), origins)

    def _into_windows(self, step: Step, batch: list[Any], times: list[int] | None, now: float,
                      keys: list[Any]) -> None:
        if times is None:  # processing time: every record of the batch arrived now (never late)
            times, closed_before = [to_us(now)] * len(batch), -math.inf
        else:  # windows ending by then were emitted
            closed_before = self.progress.mark - to_us(step.lateness_s)
        joined = step.kind == "window_join"
        for i, (record, t, key) in enumerate(zip(batch, times, keys, strict=True)):
            if isinstance(step.window, Session):
                if t + step.window.gap_us <= closed_before:
                    self.late.append(record[1] if joined else record)
                else:
                    self._into_session(step, key, t, record)
                continue
            windows = step.window.starts(t)  # none: in a gap between sliding windows (a slide above the size)
            starts = [start for start in windows if step.window.end(start) > closed_before]
            if windows and not starts:
                self.late.append(record[1] if joined else record)
            for start in starts:
                k = (start, key)
                ok, state = self._apply(step, step.fn, self.windows[k] if k in self.windows else step.init(), record)
                if ok:
                    self.windows[k] = state
                    if self.capture:
                        ref = (self._code, self._seqs[i])
                        if joined:  # per side, in the order of the window's records
                            self.window_origins.setdefault(k, ([], []))[record[0]].append(ref)
                        else:
                            self.window_origins.setdefault(k, []).append(ref)

    def _interval(self, batch: list[Any], times: list[int], keys: list[Any], side: int) -> Out:
        """An interval join's pairs for ``batch`` (records behind the watermark are late)."""
        records, out_times = [], []
        out_origins: list[Any] | None = [] if self.capture else None
        mark = self.progress.mark
        for i, (record, t, key) in enumerate(zip(batch, times, keys, strict=True)):
            if t < mark:
                self.late.append(record)
                continue
            ref = (self._code, self._seqs[i]) if self.capture else None
            pairs, pair_times, pair_refs = self.joined.add(key, side, t, record, ref)
            records += pairs
            out_times += pair_times
            if out_origins is not None:
                out_origins += [[other, ref] if side else [ref, other] for other in pair_refs]
        return Out(records, out_times, out_origins)

    def _timers(self, step: Step, now_us: float) -> Out:
        """The timers due by ``now_us``, fired in time order: in event time those before the
        watermark (a record at the watermark may still come), in processing time those at or
        before the clock. A timer that one sets (due already) fires in the same sweep; one a
        ``clear()`` cancelled does not."""
        bound = now_us if self.progress is None or now_us == DONE else now_us - 1
        due = iter(lambda: self.state.next_due(bound), None)  # one at a time: each sees the last one's effects
        return self._called(step, step.fn.on_timer, ((key, at, seconds(at)) for at, key in due), now_us,
                            (lambda _, key: self.history.so_far(key)) if self.capture else None)

    def _called(self, step: Step, method: Any, calls: Any, watermark: float, origin_of: Any = None) -> Out:
        """A process step's ``method(ctx, arg)`` for each ``(key, at, arg)`` of ``calls`` (``at``:
        the record's or the timer's time, µs), with the key's context; what they emit, at ``at``
        in event time (capturing lineage, with ``origin_of(call's index, key)``)."""
        out: list[Any] = []
        out_times: list[int] | None = None if self.time is None else []
        out_origins: list[Any] | None = None if origin_of is None else []
        listed = _listed(method)
        for n, (key, at, arg) in enumerate(calls):
            ctx = Context(self.state, step.fn.init, key, at, None if self.time is None else at, watermark)
            ok, made = self._apply(step, listed, ctx, arg)
            if ok:
                out += made
                if out_times is not None:
                    out_times += [at] * len(made)
                if out_origins is not None:  # (once per call that went through: one set aside is no origin)
                    origin = origin_of(n, key)
                    out_origins += [origin] * len(made)
        return Out(out, out_times, out_origins)

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

    def _ports(self, out: Out) -> list[Out]:
        """``out`` (the keyed step's records, or the stage's input) through the stage's stateless
        steps that lead to a port: the records of each port."""
        steps = self.stage.steps
        made: list[Out | None] = [None] * len(steps)
        if self.stage.keyed is not None:
            made[0] = out
        for i in self._live:
            step = steps[i]
            made[i] = self._step(step, out if step.after is None else made[step.after])
        return [out if port.step is None else made[port.step] for port in self.stage.ports]

    def _step(self, step: Step, given: Out) -> Out:
        """One stateless step; a record's time goes with what it becomes (the records of a
        ``flat_map`` all take it)."""
        records, times, origins = given
        out: list[Any] = []
        out_times: list[int] | None = None if times is None else []
        out_origins: list[Any] | None = None if origins is None else []
        if step.kind == "select":  # a route's output: no user code
            for i, (name, record) in enumerate(records):
                if name == step.fn:
                    out.append(record)
                    if out_times is not None:
                        out_times.append(times[i])
                    if out_origins is not None:
                        out_origins.append(origins[i])
            return Out(out, out_times, out_origins)
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
            elif step.kind == "route":  # (its function makes a list: Stream.route)
                if not self._routed(step, record, value):
                    continue
                out.extend(value)
                n = len(value)
            elif value:
                out.append(record)
                n = 1
            else:
                continue
            if out_times is not None:
                out_times.extend((times[i],) * n)
            if out_origins is not None:
                out_origins.extend((origins[i],) * n)
        return Out(out, out_times, out_origins)

    def _routed(self, step: Step, record: Any, pairs: list[Any]) -> bool:
        """Whether every pair a route made names one of its outputs (else the record's policy)."""
        for pair in pairs:
            if not (isinstance(pair, tuple) and len(pair) == 2 and pair[0] in step.outputs):
                error = (f"operator {step.name} made {pair!r} of record {record!r}: a route makes (output, record) "
                         f"pairs, the outputs among {list(step.outputs)}")
                if step.on_error == "dead_letter":
                    self.dead_letters.append(DeadLetter(step.name, record, error))
                    return False
                raise RecordError(error)
        return True

    def _apply(self, step: Step, fn: Any, *args: Any) -> tuple[bool, Any]:
        record = args[-1]
        try:
            return True, fn(*args)
        except Exception as exc:  # noqa: BLE001 - a user function: its policy says what happens
            if step.on_error == "dead_letter":
                self.dead_letters.append(DeadLetter(step.name, record, f"{type(exc).__name__}: {exc}"))
                return False, None
            raise RecordError(f"operator {step.name} raised {type(exc).__name__} on record {record!r}: {exc}") from exc


def _listed(method: Any) -> Any:
    """``method``, its records made a list (a generator runs inside the call, errors and all)."""
    def call(*args: Any) -> list[Any]:
        made = method(*args)
        return [] if made is None else list(made)
    return call


def _order(k: tuple[int, Any]) -> tuple[int, str]:
    return k[0], repr(k[1])
