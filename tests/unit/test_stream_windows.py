"""Window logic of one operator instance, and the watermarks it acts on, against plain-Python
oracles on seeded input (no actors). Whole flows are in test_stream_watermarks.py."""

from __future__ import annotations

import collections
import math
import random

import pytest

from actorrt.streaming.logic import StageLogic
from actorrt.streaming.plan import EventTime, Input, Port, Sliding, Stage, Step, Tumbling, to_us
from actorrt.streaming.progress import InputProgress, SourceProgress


def _logic(window, time=None, upstreams=1) -> StageLogic:
    step = Step("window", "sum", lambda acc, record: acc + record[2], init=lambda: 0, window=window)
    put = Input(0, 0, key=lambda r: r[0])
    return StageLogic(Stage(1, [put], [step], [Port(0)]), time, [put] * upstreams)


def _records(seed: int, n: int = 600, disorder: int = 5, keys: int = 3) -> list[tuple[str, int, int]]:
    """(key, event time in s, value): times mostly rising, each up to ``disorder`` s early."""
    rng = random.Random(seed)
    return [(f"k{rng.randrange(keys)}", max(0, i // 3 - rng.randrange(disorder + 1)), rng.randrange(100))
            for i in range(n)]


def _feed(logic: StageLogic, records, batch: int = 7, upstream: int = 0):
    """``records`` as one source instance sends them: with their times, and its watermark after
    each batch. Returns what was emitted."""
    source = SourceProgress(logic.time)
    emitted = []
    for i in range(0, len(records), batch):
        part = records[i:i + batch]
        times = [to_us(logic.time.of(r)) for r in part]
        source.read(times)
        emitted += logic.process(part, 0.0, upstream, times, source.mark)[0].records
    return emitted


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_event_time_tumbling_windows_equal_the_oracle_and_close_as_the_watermark_passes(seed):
    records = _records(seed)
    logic = _logic(Tumbling(10), EventTime(lambda r: r[1], max_delay_s=5))
    early = _feed(logic, records)
    emitted = early + logic.finish()[0].records
    oracle = collections.Counter()
    for key, t, v in records:
        oracle[(key, t - t % 10)] += v
    assert {(k, s): total for k, s, _, total in emitted} == dict(oracle)
    assert all(end - start == 10 for _, start, end, _ in emitted)
    assert logic.late == []  # disorder within max_delay: nothing is late
    newest = max(t for _, t, _ in records)
    assert early and all(end <= newest - 5 for _, _, end, _ in early)  # closed on the way, by the watermark
    assert len(emitted) == len({(k, s) for k, s, _, _ in emitted})


def test_event_time_sliding_windows_hold_each_record_size_over_slide_times():
    records = _records(6, disorder=3)
    logic = _logic(Sliding(12, 4), EventTime(lambda r: r[1], max_delay_s=3))
    emitted = _feed(logic, records) + logic.finish()[0].records
    oracle = collections.Counter()
    for key, t, v in records:
        for start in range(t - t % 4 - 8, t + 1, 4):
            if start <= t < start + 12:
                oracle[(key, start)] += v
    assert {(k, s): total for k, s, _, total in emitted} == dict(oracle)


def test_window_bounds_are_whole_microseconds_whichever_time_opens_them():
    window = Sliding(0.4, 0.2)
    for t in (31.8, 31.8000002, 31.9999999, 32.0):
        starts = window.starts(to_us(t))
        assert all(start % 200_000 == 0 and start <= to_us(t) < window.end(start) for start in starts)
        assert len(starts) == 2


def test_a_record_between_windows_that_slide_past_their_size_is_in_none_and_not_late():
    logic = _logic(Sliding(2, 5), EventTime(lambda r: r[1]))
    emitted = _feed(logic, [("a", t, 1) for t in range(20)], batch=1) + logic.finish()[0].records
    assert [(start, end, n) for _, start, end, n in emitted] == [(0, 2, 2), (5, 7, 2), (10, 12, 2), (15, 17, 2)]
    assert logic.late == []


def test_processing_time_windows_follow_the_clock_and_close_without_records():
    logic = _logic(Tumbling(1.0))
    records = [("a", 0, 1), ("b", 0, 2), ("a", 0, 3)]
    assert logic.process(records[:2], now=10.2)[0].records == []
    assert logic.process(records[2:], now=10.9)[0].records == []
    assert logic.close(now=10.99)[0].records == []
    assert logic.close(now=11.0)[0].records == [("a", 10.0, 11.0, 4), ("b", 10.0, 11.0, 2)]  # no record needed
    assert logic.finish()[0].records == []


def test_an_idle_source_moves_its_watermark_on_with_the_clock_only_if_asked():
    for idle_s, marks in [(1.0, (5.0, 10.0)), (None, (1.0, 1.0))]:
        source = SourceProgress(EventTime(lambda r: r, max_delay_s=2, idle_s=idle_s))
        source.read([to_us(3)])
        source.check_idle(now=100.0)  # the tick after a batch: busy
        source.check_idle(now=105.0)  # none since, for 5 s: 3 - 2 + 5 - 1 = 5 (with idle_s)
        assert (source.mark, source.idle) == (to_us(marks[0]), idle_s is not None)
        source.check_idle(now=110.0)
        assert source.mark == to_us(marks[1])
        source.read([to_us(4)])  # it reads again: busy, and its watermark never goes back
        assert (source.mark, source.idle) == (to_us(max(marks[1], 4 - 2)), False)


def test_a_source_behind_its_input_is_not_idle_however_long_its_batches_waited():
    """Idleness is judged between ticks, and a tick is a task behind the batches in the mailbox:
    a batch that waited there longer than idle_s (back-pressure, a recovery) still counts."""
    source = SourceProgress(EventTime(lambda r: r, max_delay_s=1, idle_s=2))
    source.read([to_us(100)])
    source.check_idle(now=0.0)
    source.read([to_us(100.5)])  # it waited 5 s for its turn
    source.check_idle(now=5.0)
    assert (source.mark, source.idle) == (to_us(99.5), False)


def test_an_instance_has_the_minimum_of_its_busy_inputs():
    progress = InputProgress(3)
    progress.update(0, 50)
    progress.update(1, 20)
    assert progress.mark == -math.inf  # input 2 has said nothing yet
    progress.update(2, 10, idle=True)
    assert (progress.mark, progress.idle) == (20, False)  # the idle one is left out
    progress.update(1, 15)  # an input never takes the watermark back
    assert progress.mark == 20
    progress.update(0, 60, idle=True)
    progress.update(1, 30, idle=True)
    assert (progress.mark, progress.idle) == (60, True)  # all idle: the newest of them
    progress.update(2, 40)  # awake, behind: the watermark stays
    assert (progress.mark, progress.idle) == (60, False)
    for upstream in range(3):
        progress.finish(upstream)
    assert progress.mark == math.inf


def test_the_watermark_waits_for_the_slowest_upstream_so_skew_makes_nothing_late():
    records = _records(9, n=400, disorder=2)
    logic = _logic(Tumbling(10), EventTime(lambda r: r[1], max_delay_s=2), upstreams=2)
    ahead, behind = records[0::2], records[1::2]
    emitted = _feed(logic, ahead, batch=10, upstream=0)  # upstream 0 runs far ahead (1 is recovering, say)
    assert emitted == []  # upstream 1 sent nothing yet: the watermark holds
    emitted += _feed(logic, behind, batch=10, upstream=1)
    emitted += logic.upstream_done(0, 0.0)[0].records + logic.upstream_done(1, 0.0)[0].records
    oracle = collections.Counter()
    for key, t, v in records:
        oracle[(key, t - t % 10)] += v
    assert logic.late == [] and {(k, s): total for k, s, _, total in emitted} == dict(oracle)
