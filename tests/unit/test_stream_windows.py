"""Window logic of a streaming operator against plain-Python oracles on seeded input (no actors)."""

from __future__ import annotations

import collections
import random

import pytest

from actorrt.streaming.logic import StageLogic
from actorrt.streaming.plan import EventTime, Session, Sliding, Stage, Step, Tumbling


def _logic(window, clock=None, merge=None, fn=None) -> StageLogic:
    step = Step("window", "sum", fn, init=lambda: 0, window=window, merge=merge,
                **({"clock": clock} if clock is not None else {}))
    return StageLogic(Stage(1, key=lambda r: r[0], steps=[step]))


def _records(seed: int, n: int = 600, disorder: int = 5, keys: int = 3) -> list[tuple[str, int, int]]:
    """(key, event time, value): times mostly rising, each up to ``disorder`` s early."""
    rng = random.Random(seed)
    return [(f"k{rng.randrange(keys)}", max(0, i // 3 - rng.randrange(disorder + 1)), rng.randrange(100))
            for i in range(n)]


def _run(logic: StageLogic, records, batch: int = 7, now=lambda i: 0.0):
    emitted = []
    for i in range(0, len(records), batch):
        emitted += logic.process(records[i:i + batch], now(i))
    return emitted, emitted + logic.finish()


def _sum_fn(acc, record):
    return acc + record[2]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_event_time_tumbling_windows_equal_the_oracle_and_close_as_the_watermark_passes(seed):
    records = _records(seed)
    logic = _logic(Tumbling(10), EventTime(lambda r: r[1], max_delay_s=5), fn=_sum_fn)
    early, emitted = _run(logic, records)
    oracle = collections.Counter()
    for key, t, v in records:
        oracle[(key, t - t % 10)] += v
    assert {(k, s): total for k, s, _, total in emitted} == dict(oracle)
    assert all(end - start == 10 for _, start, end, _ in emitted)
    assert logic.late == []  # disorder within max_delay: nothing is late
    newest = max(t for _, t, _ in records)
    assert early and all(end <= newest - 5 for _, _, end, _ in early)  # closed on the way, by the watermark
    assert len(emitted) == len({(k, s) for k, s, _, _ in emitted})


@pytest.mark.parametrize("seed", [4, 5])
def test_records_behind_the_watermark_go_to_the_late_output_not_into_windows(seed):
    records = _records(seed, disorder=30)
    lateness, delay, batch = 2, 5, 7
    logic = _logic(Tumbling(10), EventTime(lambda r: r[1], max_delay_s=delay, lateness_s=lateness), fn=_sum_fn)
    _, emitted = _run(logic, records, batch)
    # The oracle: a record is late if its window's end plus the lateness was at or before the
    # watermark when its batch came (the newest time of earlier batches minus the delay).
    oracle, late, newest = collections.Counter(), [], float("-inf")
    for i in range(0, len(records), batch):
        watermark = newest - delay
        for key, t, v in records[i:i + batch]:
            if t - t % 10 + 10 + lateness <= watermark:
                late.append((key, t, v))
            else:
                oracle[(key, t - t % 10)] += v
        newest = max([newest] + [t for _, t, _ in records[i:i + batch]])
    assert late, "the seed makes no late record"
    assert logic.late == late
    assert {(k, s): total for k, s, _, total in emitted} == dict(oracle)


def test_event_time_sliding_windows_hold_each_record_size_over_slide_times():
    records = _records(6, disorder=3)
    logic = _logic(Sliding(12, 4), EventTime(lambda r: r[1], max_delay_s=3), fn=_sum_fn)
    _, emitted = _run(logic, records)
    oracle = collections.Counter()
    for key, t, v in records:
        for start in range(t - t % 4 - 8, t + 1, 4):
            if start <= t < start + 12:
                oracle[(key, start)] += v
    assert {(k, s): total for k, s, _, total in emitted} == dict(oracle)


@pytest.mark.parametrize("seed", [7, 8])
def test_event_time_session_windows_equal_the_oracle_with_bridged_sessions_merged(seed):
    rng = random.Random(seed)
    times = sorted(rng.randrange(0, 400) for _ in range(200))
    records = [(f"k{rng.randrange(2)}", t, rng.randrange(100)) for t in times]
    shuffled = sorted(records, key=lambda r: r[1] + rng.random() * 8)  # out of order by up to 8 s
    logic = _logic(Session(5), EventTime(lambda r: r[1], max_delay_s=10), merge=lambda a, b: a + b, fn=_sum_fn)
    _, emitted = _run(logic, shuffled, batch=3)
    oracle = []
    for key in sorted({k for k, _, _ in records}):
        mine = sorted((t, v) for k, t, v in records if k == key)
        start, last, total = mine[0][0], mine[0][0], 0
        for t, v in mine:
            if t - last >= 5:
                oracle.append((key, start, last + 5, total))
                start, total = t, 0
            last, total = t, total + v
        oracle.append((key, start, last + 5, total))
    assert sorted(emitted) == sorted(oracle)
    assert logic.late == []


def test_processing_time_windows_follow_the_clock_and_close_without_records():
    logic = _logic(Tumbling(1.0), fn=_sum_fn)
    records = [("a", 0, 1), ("b", 0, 2), ("a", 0, 3)]
    assert logic.process(records[:2], now=10.2) == []
    assert logic.process(records[2:], now=10.9) == []
    assert logic.close(now=10.99) == []
    assert logic.close(now=11.0) == [("a", 10.0, 11.0, 4), ("b", 10.0, 11.0, 2)]  # no record needed
    assert logic.finish() == []


def test_an_idle_input_moves_the_event_time_watermark_on_with_the_clock_only_if_asked():
    for idle_s, closes_at in [(1.0, 110.0), (None, None)]:
        logic = _logic(Tumbling(10), EventTime(lambda r: r[1], max_delay_s=2, idle_s=idle_s), fn=_sum_fn)
        assert logic.process([("a", 3, 1)], now=100.0) == []
        assert logic.close(now=105.0) == []  # idle 5 s: watermark 3 - 2 + 5 - 1 = 5 (with idle_s)
        closed = logic.close(now=110.0)  # 3 - 2 + 10 - 1 = 10: the window's end
        assert closed == ([("a", 0, 10, 1)] if closes_at else [])


def test_the_watermark_waits_for_the_slowest_upstream_so_skew_makes_nothing_late():
    records = _records(9, n=400, disorder=2)
    logic = _logic(Tumbling(10), EventTime(lambda r: r[1], max_delay_s=2), fn=_sum_fn)
    logic.upstreams = 2
    ahead, behind = records[0::2], records[1::2]
    emitted = []
    for i in range(0, len(ahead), 10):  # upstream 0 runs far ahead (upstream 1 is recovering, say)
        emitted += logic.process(ahead[i:i + 10], 0.0, upstream=0)
    assert emitted == []  # upstream 1 sent nothing yet: the watermark holds
    for i in range(0, len(behind), 10):
        emitted += logic.process(behind[i:i + 10], 0.0, upstream=1)
    logic.upstream_done(0)
    logic.upstream_done(1)
    emitted += logic.close(0.0)
    oracle = collections.Counter()
    for key, t, v in records:
        oracle[(key, t - t % 10)] += v
    assert logic.late == [] and {(k, s): total for k, s, _, total in emitted} == dict(oracle)
