"""Watermarks through whole dataflows, run in one process (``tests/support/local_flow.py``): the
operators' own logic, every message delivered in a seeded random order, against plain-Python
oracles. Parallelism above 1 at the source and in the middle, out-of-order input."""

from __future__ import annotations

import collections
import random

import pytest

from actorrt.streaming import Dataflow, EventTime, Fed, Session, Sliding, Tumbling
from tests.support.local_flow import LocalFlow


def _events(seed: int, n: int, disorder_ms: int, keys: int = 7, per_s: int = 1000) -> list[tuple[str, float, int]]:
    """(key, event time in s, value): times rise ``per_s`` records a second, each record up to
    ``disorder_ms`` early, on a millisecond grid (so nothing rounds across a window's bound)."""
    rng = random.Random(seed)
    return [(f"k{rng.randrange(keys)}", max(0, i * 1000 // per_s - rng.randrange(disorder_ms + 1)) / 1000,
             rng.randrange(100)) for i in range(n)]


def _window_oracle(events, size_s: float) -> dict[tuple[str, float], int]:
    size_ms = round(size_s * 1000)
    oracle: collections.Counter = collections.Counter()
    for key, t, value in events:
        oracle[(key, round(t * 1000) // size_ms * size_ms / 1000)] += value
    return dict(oracle)


def _sum(acc, event):
    return acc + event[2]


def test_event_time_windows_behind_a_merging_stage_mark_no_in_order_record_late():
    """The flow that marked 37% of its records late: two source instances, a map of parallelism
    2 that takes records of both (in turn), then windows of parallelism 3. Each instance passes on
    the minimum of its inputs' watermarks, so however far the inputs drift apart (every channel is
    delayed at random here) no record within ``max_delay_s`` is late."""
    events = _events(1, 40_000, disorder_ms=800, per_s=2000)
    for seed in (1, 2, 3):
        flow = Dataflow("late", batch_size=100)
        (flow.source(Fed(), parallelism=2, time=EventTime(lambda e: e[1], max_delay_s=1.0))
         .map(lambda e: e, parallelism=2)
         .key_by(lambda e: e[0])
         .window(Tumbling(2.0), lambda: 0, _sum, parallelism=3)
         .collect())
        local = LocalFlow(flow.plan, seed)
        local.feed(events)
        result = local.finish()
        assert result.late == []
        assert {(k, start): total for k, start, _, total in result.outputs} == _window_oracle(events, 2.0)
        assert len(result.outputs) == len(_window_oracle(events, 2.0))  # each window once


def test_windows_close_on_the_way_not_only_at_the_end_of_the_input():
    events = _events(2, 6000, disorder_ms=300)
    flow = Dataflow("early", batch_size=50)
    (flow.source(Fed(), parallelism=2, time=EventTime(lambda e: e[1], max_delay_s=0.5))
     .map(lambda e: e, parallelism=3).key_by(lambda e: e[0]).window(Tumbling(1.0), lambda: 0, _sum, parallelism=2)
     .collect())
    local = LocalFlow(flow.plan, 7)
    local.feed(events)
    local.deliver()
    # Every source instance read past 5.5 s: every window ending by 5 s is out, before the end.
    early = {(k, start) for k, start, _, _ in local.result.outputs}
    assert {(k, s) for k, s in _window_oracle([e for e in events if e[1] < 5.0], 1.0)} <= early


def test_chained_windows_move_on_where_an_instance_owns_no_key():
    """A window's output keyed again for a second window: with 2 keys over 3 instances one
    instance of the first window gets no records, yet the second window's watermark must move,
    as the input does, without the end of the input (an unbounded source has none)."""
    events = [(f"k{i % 2}", i / 100, 1) for i in range(3000)]  # 30 s, in order
    flow = Dataflow("chained", batch_size=20)
    (flow.source(Fed(), time=EventTime(lambda e: e[1]))
     .key_by(lambda e: e[0]).window(Tumbling(1.0), lambda: 0, _sum, parallelism=3)
     .key_by(lambda w: "all").window(Tumbling(5.0), lambda: 0, lambda n, w: n + w[3], parallelism=3)
     .collect())
    local = LocalFlow(flow.plan, 3)
    local.feed(events)
    local.deliver()  # no end of the input
    emitted = sorted((start, total) for _, start, _, total in local.result.outputs)
    assert emitted == [(float(s), 500) for s in range(0, 25, 5)]  # every 5 s window the input passed, in full
    # A watermark alone goes to an instance only where it crosses a window's end: fewer messages
    # than the source's batches.
    assert local.result.advances < len(events) / 20


def test_an_idle_source_instance_stops_holding_the_watermark_back():
    """Three source instances, input for two: the third, idle past ``idle_s``, is left out of the
    minimum, and windows close; without ``idle_s`` they wait for it (until the end)."""
    events = [("k", i / 10, 1) for i in range(200)]  # 20 s
    for idle_s, closed in [(1.0, True), (None, False)]:
        flow = Dataflow("idle", batch_size=10)
        (flow.source(Fed(), parallelism=3, time=EventTime(lambda e: e[1], idle_s=idle_s))
         .key_by(lambda e: e[0]).window(Tumbling(5.0), lambda: 0, _sum).collect())
        local = LocalFlow(flow.plan, 1)
        local.tick(100.0)  # the first look at the clock
        for i in range(0, len(events), 10):  # to instances 0 and 1 only, read at 101.4
            local._queue(0, (i // 10) % 2, -1, (events[i:i + 10], 101.4))
        local.deliver()
        local.tick(101.5)  # instance 2 has read nothing for 1.5 s; the others are busy
        local.deliver()
        assert bool(local.result.outputs) == closed


def test_sliding_windows_have_the_same_bounds_whichever_record_opened_them():
    """Processing-time sliding windows over arrival times that floats cannot step back to
    exactly (31.8 and 31.8000002 were two starts of one window): each window is emitted once,
    with every record it holds."""
    rng = random.Random(5)
    arrivals = sorted(30 + rng.random() * 5 for _ in range(20_000))
    flow = Dataflow("sliding", batch_size=1)
    flow.source(Fed()).key_by(lambda w: w).window(Sliding(0.4, 0.2), lambda: 0, lambda n, w: n + 1).collect()
    local = LocalFlow(flow.plan, 1)
    for t in arrivals:
        local.feed(["word"], now=t)
        local.deliver(now=t)
    result = local.finish(now=40.0)
    starts = [start for _, start, _, _ in result.outputs]
    assert len(starts) == len(set(starts))  # no window twice
    oracle: collections.Counter = collections.Counter()
    for t in arrivals:
        t_us = round(t * 1_000_000)
        for k in range(t_us // 200_000 - 1, t_us // 200_000 + 1):
            if k * 200_000 <= t_us < k * 200_000 + 400_000:
                oracle[k * 200_000 / 1_000_000] += 1
    assert {start: n for _, start, _, n in result.outputs} == dict(oracle)
    assert all(end - start == pytest.approx(0.4, abs=1e-9) for _, start, end, _ in result.outputs)


def test_records_behind_the_watermark_go_to_the_late_output_with_lateness_as_a_grace():
    events = _events(4, 10_000, disorder_ms=5000)  # far more disorder than max_delay_s allows
    for lateness_s in (0.0, 2.0):
        flow = Dataflow("late", batch_size=7)
        (flow.source(Fed(), time=EventTime(lambda e: e[1], max_delay_s=1.0))
         .key_by(lambda e: e[0]).window(Tumbling(1.0), lambda: 0, _sum, lateness_s=lateness_s).collect())
        local = LocalFlow(flow.plan, 1)
        local.feed(events)
        result = local.finish()
        # The oracle: late if the window's end plus the lateness is at or before the watermark when
        # its batch came (the newest time of the batches before, less max_delay_s).
        late, kept, newest_ms = [], [], float("-inf")
        for i in range(0, len(events), 7):
            for event in events[i:i + 7]:
                end_ms = round(event[1] * 1000) // 1000 * 1000 + 1000
                (late if end_ms + round(lateness_s * 1000) <= newest_ms - 1000 else kept).append(event)
            newest_ms = max([newest_ms] + [round(e[1] * 1000) for e in events[i:i + 7]])
        assert late and result.late == late
        assert {(k, start): total for k, start, _, total in result.outputs} == _window_oracle(kept, 1.0)


def test_session_windows_in_event_time_merge_sessions_a_record_bridges():
    rng = random.Random(8)
    times = sorted(rng.randrange(0, 400_000) for _ in range(300))
    events = [(f"k{rng.randrange(2)}", t / 1000, rng.randrange(100)) for t in times]
    shuffled = sorted(events, key=lambda e: e[1] + rng.random() * 8)  # out of order by up to 8 s
    flow = Dataflow("sessions", batch_size=3)
    (flow.source(Fed(), parallelism=2, time=EventTime(lambda e: e[1], max_delay_s=10))
     .key_by(lambda e: e[0]).window(Session(5), lambda: 0, _sum, merge=lambda a, b: a + b, parallelism=2)
     .collect())
    local = LocalFlow(flow.plan, 2)
    local.feed(shuffled)
    result = local.finish()
    oracle = []
    for key in sorted({k for k, _, _ in events}):
        mine = sorted((round(t * 1000), v) for k, t, v in events if k == key)  # in ms
        start, last, total = mine[0][0], mine[0][0], 0
        for t, v in mine:
            if t - last >= 5000:
                oracle.append((key, start / 1000, (last + 5000) / 1000, total))
                start, total = t, 0
            last, total = t, total + v
        oracle.append((key, start / 1000, (last + 5000) / 1000, total))
    assert result.late == []
    assert sorted(result.outputs) == sorted(oracle)
