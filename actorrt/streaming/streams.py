"""The streams a user builds a dataflow from: ``Stream`` (stateless steps, branches, ``union``,
``route``), ``KeyedStream`` (``fold``, ``window``, ``process``) and ``ConnectedStreams`` (two
keyed streams into one step: ``process``, the window joins, ``interval_join``). Each method adds a
step to the flow's ``Plan``: in the stage of the records it takes, or in a new one
(``Dataflow._stage_of``), and returns the stream of what it makes.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from actorrt.lineage.policies import Policy
from actorrt.streaming.connectors import Sink
from actorrt.streaming.joins import window_join_add, window_join_init, window_join_merge
from actorrt.streaming.plan import (
    Input,
    Port,
    Session,
    Step,
    Window,
    check_lateness,
    check_on_error,
    check_ttl,
    check_window,
    step_name,
)
from actorrt.streaming.process import KeyedProcess

if TYPE_CHECKING:
    from actorrt.streaming.dataflow import Dataflow

Origin = tuple[int, int | None]  # (stage, step): a stream is the records of that step (None: the stage's input)


class Stream:
    """The records of one step of a dataflow (or of several, after ``union``); each method adds a
    step that takes them and returns its stream."""

    def __init__(self, flow: Dataflow, origins: list[Origin]) -> None:
        self._flow = flow
        self._origins = origins

    # Stateless steps run in the stage of the records they take (one step's records may go to
    # several: each branch runs there); with ``parallelism`` they start a stage of their own
    # (records reach it in turn). ``on_error``: "fail" (the run stops with the record) or
    # "dead_letter" (the record is put aside in ``RunResult.dead_letters`` and the run goes on).

    def map(self, fn: Callable[[Any], Any], *, parallelism: int | None = None, name: str | None = None,
            on_error: str = "fail", ft: Policy | str | None = None) -> Stream:
        """Each record becomes ``fn(record)``."""
        return self._stateless("map", fn, name, on_error, parallelism, ft)

    def flat_map(self, fn: Callable[[Any], Iterable[Any]], *, parallelism: int | None = None,
                 name: str | None = None, on_error: str = "fail", ft: Policy | str | None = None) -> Stream:
        """Each record becomes the records ``fn(record)`` returns."""
        if not callable(fn):
            raise TypeError(f"flat_map() takes a function, not {fn!r}")
        return self._stateless("flat_map", lambda record: list(fn(record)), name or step_name("flat_map", fn, None),
                               on_error, parallelism, ft)

    def filter(self, fn: Callable[[Any], bool], *, parallelism: int | None = None, name: str | None = None,
               on_error: str = "fail", ft: Policy | str | None = None) -> Stream:
        """The records for which ``fn(record)`` is true."""
        return self._stateless("filter", fn, name, on_error, parallelism, ft)

    def route(self, fn: Callable[[Any], Iterable[tuple[str, Any]]], outputs: Iterable[str], *,
              parallelism: int | None = None, name: str | None = None, on_error: str = "fail") -> dict[str, Stream]:
        """Side outputs: ``fn(record)`` gives ``(output, record)`` pairs, each record to the named
        output (none, one or several per record); returns each output's stream, by name. A name
        not among ``outputs`` fails the record (or puts it aside, with ``on_error="dead_letter"``)."""
        names = tuple(outputs) if not isinstance(outputs, str) else (outputs,)
        if not names or not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
            raise ValueError(f"route() takes distinct output names (non-empty strings), not {outputs!r}")
        if not callable(fn):
            raise TypeError(f"route() takes a function, not {fn!r}")
        routed = self._stateless("route", lambda record: list(fn(record)), name or step_name("route", fn, None),
                                 on_error, parallelism, outputs=names)
        return {n: routed._then(Step("select", f"select({n})", n)) for n in names}

    def union(self, *others: Stream) -> Stream:
        """The records of this stream and of ``others``, as one stream (a keyed step after it
        takes them all; each keeps its own watermark, and the slowest holds the others back)."""
        for other in others:
            if not isinstance(other, Stream) or other._flow is not self._flow:
                raise ValueError(f"union() takes streams of the same dataflow, not {other!r}")
        origins = list(self._origins)
        for other in others:
            origins += other._origins  # a stream unioned with itself gives its records twice, as in Flink
        return Stream(self._flow, origins)

    def key_by(self, key: Callable[[Any], Any]) -> KeyedStream:
        """Records by ``key(record)``: the next step keeps state per key, on the instance that owns it."""
        return KeyedStream(self._flow, self._origins, key)

    def collect(self, name: str = "outputs") -> None:
        """Keep what this stream emits: ``run()`` returns it in ``RunResult.outputs`` (or, under
        another ``name``, in ``RunResult.collected[name]``)."""
        for port in self._ports(made=False):
            if port.collect not in (None, name):
                raise ValueError(f"this stream is collected as {port.collect!r} already")
        for port in self._ports():
            port.collect = name

    def sink(self, sink: Sink) -> None:
        """Write what this stream emits to ``sink`` (e.g. ``RedisStreamSink``), exactly once."""
        if not callable(getattr(sink, "write", None)):
            raise TypeError(f"sink() takes a sink with a write(writer, number, records) method, not {sink!r}")
        if any(port.sink is not None for port in self._ports(made=False)) or \
                len(set(self._origins)) < len(self._origins):
            raise ValueError("this stream has a sink already: one sink per stream")
        for port in self._ports():
            port.sink = sink

    def _ports(self, made: bool = True) -> list[Port]:
        """The ports of this stream's records (``made``: those it has not yet made too)."""
        stages = self._flow._plan.stages
        if not made:
            return [port for s, step in self._origins for port in stages[s].ports if port.step == step]
        return [stages[s].ports[stages[s].port(step)] for s, step in self._origins]

    def _inputs(self, key: Callable[[Any], Any] | None, side: int = 0) -> list[Input]:
        stages = self._flow._plan.stages
        return [Input(s, stages[s].port(step), key, side) for s, step in self._origins]

    def _stateless(self, kind: str, fn: Callable[..., Any], name: str | None, on_error: str,
                   parallelism: int | None, ft: Policy | str | None = None, **more: Any) -> Stream:
        if not callable(fn):
            raise TypeError(f"{kind}() takes a function, not {fn!r}")
        step = Step(kind, step_name(kind, fn, name), fn, on_error=check_on_error(on_error), **more)
        if parallelism is None:
            if ft is not None:
                raise ValueError(f"{kind}(ft=) is the policy of a stage of its own: give it parallelism= too "
                                 f"(without, it runs in the stage of the records it takes)")
            return self._then(step)
        return self._flow._stage_of(step, parallelism, self._inputs(None), ft=ft)

    def _then(self, step: Step) -> Stream:
        """``step`` on this stream's records, in the stage (each stage, after a union) they are in."""
        origins = []
        for s, after in self._origins:
            steps = self._flow._plan.stages[s].steps
            steps.append(replace(step, after=after))
            origins.append((s, len(steps) - 1))
        return Stream(self._flow, origins)


class KeyedStream:
    def __init__(self, flow: Dataflow, origins: list[Origin], key: Callable[[Any], Any]) -> None:
        if not callable(key):
            raise TypeError(f"key_by() takes a function of a record, not {key!r}")
        self._flow = flow
        self._origins = origins
        self._key = key

    def fold(self, init: Callable[[], Any], fn: Callable[[Any, Any], Any], *, parallelism: int = 1,
             name: str | None = None, on_error: str = "fail", emit: str = "updates",
             ttl_s: float | None = None, standby: int | None = None, ft: Policy | str | None = None) -> Stream:
        """Per key, ``state = fn(state, record)`` from ``init()``. ``emit="updates"``: after each
        batch, emits ``(key, state)`` for every key the batch changed; ``emit="final"``: emits
        ``(key, state)`` once per key, at the end of the input. ``ttl_s``: a key not updated for
        that long (in the flow's time: event time or the clock) is forgotten (starts again from
        ``init()``). ``standby``: standbys of each instance (0 or 1; None: the flow's), and ``ft``:
        the instances' fault-tolerance policy (None: the flow's), as on every stage."""
        if emit not in ("updates", "final"):
            raise ValueError(f'fold(emit=) is "updates" or "final", not {emit!r}')
        return self._keyed(Step("fold", step_name("fold", fn, name), fn, init, on_error=check_on_error(on_error),
                                emit=emit, ttl_s=check_ttl(ttl_s)), parallelism, standby=standby, ft=ft)

    def reduce(self, fn: Callable[[Any, Any], Any], *, parallelism: int = 1, name: str | None = None,
               on_error: str = "fail", emit: str = "updates", ttl_s: float | None = None,
               standby: int | None = None, ft: Policy | str | None = None) -> Stream:
        """Per key, ``fn(previous, record)`` with the first record as the start (``emit``,
        ``ttl_s``: as ``fold``'s)."""
        first = object()
        return self.fold(lambda: first, lambda acc, record: record if acc is first else fn(acc, record),
                         parallelism=parallelism, name=name or step_name("reduce", fn, None), on_error=on_error,
                         emit=emit, ttl_s=ttl_s, standby=standby, ft=ft)

    def window(self, window: Window, init: Callable[[], Any], fn: Callable[[Any, Any], Any], *,
               lateness_s: float = 0.0, merge: Callable[[Any, Any], Any] | None = None, parallelism: int = 1,
               name: str | None = None, on_error: str = "fail", standby: int | None = None,
               ft: Policy | str | None = None) -> Stream:
        """Per key and window, ``state = fn(state, record)`` from ``init()``; when a window ends
        (on time, records or not) emits ``(key, start, end, state)``.

        Windows are in event time if the flow's sources have one (``source(..., time=EventTime(...))``):
        a window ends when the watermark passes its end plus ``lateness_s``, and a record for a
        window that ended is late (``RunResult.late``). Otherwise they are in processing time: a
        record belongs to the windows of the time its batch reached the operator.

        Args:
            window: ``Tumbling``, ``Sliding`` or ``Session``.
            lateness_s: event time: how long after the watermark passes a window's end it waits
                for late records (and emits it); what it emits is held back as long downstream.
            merge: joins the states of two sessions that an out-of-order record bridges (session
                windows in event time need it).
        """
        check_window(window)
        event_time = self._flow._plan.time is not None
        check_lateness(lateness_s, event_time)
        if isinstance(window, Session) and event_time and merge is None:
            raise ValueError("session windows in event time need merge=: a late record can join two sessions")
        step = Step("window", step_name("window", fn, name), fn, init, window, check_on_error(on_error), lateness_s,
                    merge)
        return self._keyed(step, parallelism, standby=standby, ft=ft)

    def process(self, fn: KeyedProcess, *, parallelism: int = 1, name: str | None = None, on_error: str = "fail",
                ttl_s: float | None = None, standby: int | None = None, ft: Policy | str | None = None) -> Stream:
        """Per record, ``fn.on_record(ctx, record)`` with the record's key, state and timers in
        ``ctx`` (``KeyedProcess``); emits what it returns. ``ttl_s``: a key whose state was not
        written for that long (in the flow's time) is forgotten, its timers kept."""
        return self._keyed(_process_step(fn, name, on_error, ttl_s), parallelism, standby=standby, ft=ft)

    def connect(self, other: KeyedStream) -> ConnectedStreams:
        """This stream (left) and ``other`` (right) into one keyed step with shared state per key:
        records of both with equal keys reach the same instance and state."""
        if not isinstance(other, KeyedStream) or other._flow is not self._flow:
            raise ValueError(f"connect() takes a keyed stream of the same dataflow (key_by), not {other!r}")
        return ConnectedStreams(self, other)

    def _keyed(self, step: Step, parallelism: int, other: KeyedStream | None = None,
               standby: int | None = None, ft: Policy | str | None = None) -> Stream:
        inputs = Stream(self._flow, self._origins)._inputs(self._key)
        if other is not None:
            inputs += Stream(self._flow, other._origins)._inputs(other._key, side=1)
        return self._flow._stage_of(step, parallelism, inputs, standby, ft)


class ConnectedStreams:
    """Two keyed streams into one step (``KeyedStream.connect``): the left one's records and the
    right one's, with their keys' shared state. Their watermark is the slower of the two."""

    def __init__(self, left: KeyedStream, right: KeyedStream) -> None:
        self._left, self._right = left, right

    def process(self, fn: KeyedProcess, *, parallelism: int = 1, name: str | None = None, on_error: str = "fail",
                ttl_s: float | None = None, standby: int | None = None, ft: Policy | str | None = None) -> Stream:
        """Per record, ``fn.on_left(ctx, record)`` or ``fn.on_right(ctx, record)`` (``KeyedProcess``),
        with the key's state and timers in ``ctx``; emits what they return (``ttl_s``: as
        ``KeyedStream.process``'s)."""
        return self._left._keyed(_process_step(fn, name, on_error, ttl_s), parallelism, self._right, standby, ft)

    def window_join(self, window: Window, *, lateness_s: float = 0.0, parallelism: int = 1,
                    name: str = "window_join", standby: int | None = None, ft: Policy | str | None = None) -> Stream:
        """Per key and window: when the window ends, ``(key, left, right)`` for every pair of a
        left and a right record in it (windows as ``KeyedStream.window``'s). Its state is the
        open windows' records."""
        return self._window(window, lateness_s, parallelism, name, "pairs", standby, ft)

    def _window(self, window: Window, lateness_s: float, parallelism: int, name: str, emit: str,
                standby: int | None, ft: Policy | str | None) -> Stream:
        check_window(window)
        check_lateness(lateness_s, self._left._flow._plan.time is not None)
        step = Step("window_join", name, window_join_add, window_join_init, window, lateness_s=lateness_s,
                    merge=window_join_merge, emit=emit)
        return self._left._keyed(step, parallelism, self._right, standby, ft)

    def window_cogroup(self, window: Window, *, lateness_s: float = 0.0, parallelism: int = 1,
                       name: str = "window_cogroup", standby: int | None = None,
                       ft: Policy | str | None = None) -> Stream:
        """Per key and window: when the window ends, ``(key, start, end, lefts, rights)``, both
        sides' records in it (either list may be empty): Flink's ``coGroup``, for what pairs
        cannot say (an outer join, a side with no match, one result per window)."""
        return self._window(window, lateness_s, parallelism, name, "groups", standby, ft)

    def interval_join(self, before_s: float, after_s: float, *, parallelism: int = 1,
                      name: str = "interval_join", standby: int | None = None,
                      ft: Policy | str | None = None) -> Stream:
        """``(key, left, right)`` for each right record at a time in ``[t - before_s, t + after_s]``
        of a left record's ``t``, as soon as the second of the two arrives; the pair's time is the
        later one's. Event time only: records are kept until the watermark passes the last time
        a record to come could match them. Records behind the watermark are late."""
        if self._left._flow._plan.time is None:
            raise ValueError("interval_join() is in event time: give the flow's sources time=EventTime(...)")
        for what, bound in (("before_s", before_s), ("after_s", after_s)):
            if isinstance(bound, bool) or not isinstance(bound, numbers.Real) or not math.isfinite(bound):
                raise ValueError(f"interval_join({what}=) is a number of seconds, not {bound!r}")
        if before_s + after_s < 0:
            raise ValueError(f"interval_join() of an empty interval: [t - {before_s}, t + {after_s}]")
        step = Step("interval_join", name, None, between=(before_s, after_s))
        return self._left._keyed(step, parallelism, self._right, standby, ft)


def _process_step(fn: Any, name: str | None, on_error: str, ttl_s: float | None) -> Step:
    if not isinstance(fn, KeyedProcess):
        raise TypeError(f"process() takes a KeyedProcess (on_record, on_left/on_right, on_timer), not {fn!r}")
    return Step("process", name or f"process({type(fn).__qualname__})", fn, on_error=check_on_error(on_error),
                ttl_s=check_ttl(ttl_s))
