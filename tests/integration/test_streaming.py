"""actorrt.streaming against real node processes: results equal plain-Python oracles, with and
without a node SIGKILLed in the middle of the stream."""

from __future__ import annotations

import collections
import contextlib
import os
import threading
import time
from pathlib import Path

import pytest

import actorrt
from actorrt.streaming import Dataflow, ListSource, OperatorStoppedError, RecordError, Sliding, Tumbling
from actorrt.streaming.testing import KillNodeAt


def _text(lines: int) -> list[str]:
    return [f"w{i % 7} w{i % 3} x{i % 11}" for i in range(lines)]


def _killing_source(records, at: int, node: int = 1, pause_every: int = 0):
    """The records, with ``node`` SIGKILLed just before record ``at`` (a testing source)."""
    for i, record in enumerate(records):
        if i == at:
            actorrt.kill_node(node)
        if pause_every and i % pause_every == 0:
            time.sleep(0.005)
        yield record


def _wordcount(source, batch_size: int = 20) -> Dataflow:
    flow = Dataflow("wordcount", batch_size=batch_size, max_in_flight=4)
    (flow.source(source)
     .flat_map(str.split, parallelism=2)
     .key_by(lambda word: word)
     .fold(lambda: 0, lambda n, word: n + 1, parallelism=2)
     .collect())
    return flow


def _final(updates) -> dict:
    final = {}
    for key, value in updates:
        final[key] = value
    return final


def test_wordcount_equals_the_oracle_and_survives_a_node_killed_mid_stream(cluster_with):
    text = _text(3000)
    oracle = collections.Counter(w for line in text for w in line.split())
    with cluster_with(num_nodes=2, store_shards=1):
        assert _final(_wordcount(text).run(timeout=120).outputs) == oracle
        result = _wordcount(_killing_source(text, at=1200, pause_every=50)).run(timeout=120)
        assert _final(result.outputs) == oracle  # every word counted once: exactly-once through the kill
        recoveries = [r for n in actorrt.stats()["nodes"] for r in n["recoveries"]]
        assert recoveries and recoveries[-1]["tasks_replayed"] > 0, recoveries
        # Each instance's updates per key only grow by what it counted: none was applied twice.
        for key, value in result.outputs:
            assert 1 <= value <= oracle[key]


def test_tumbling_windows_close_on_time_and_count_every_record_once_through_a_kill(cluster_with):
    def arrivals():
        for i in range(400):
            if i % 20 == 0:
                time.sleep(0.02)
            if i == 200:
                actorrt.kill_node(1)
            yield i
        fed_at.append(time.time())
        time.sleep(0.4)  # idle: the last windows must close without records
        yield 400

    fed_at: list[float] = []
    with cluster_with(num_nodes=2, store_shards=1):
        flow = Dataflow("windows", batch_size=10)
        (flow.source(arrivals())
         .map(lambda i: (i % 3, i))
         .key_by(lambda kv: kv[0])
         .window(Tumbling(0.05), lambda: (0, 0), lambda acc, kv: (acc[0] + 1, acc[1] + kv[1]), parallelism=2)
         .map(lambda w: (*w, actorrt.now()))  # when each window was emitted
         .collect())
        windows = flow.run(timeout=120).outputs
    assert sum(n for *_, (n, _), _ in windows) == 401
    assert sum(s for *_, (_, s), _ in windows) == sum(range(401))
    last = max(start for _, start, *_ in windows)  # record 400's: closed by the end of the input
    for _, start, end, _, emitted in windows:
        assert end - start == pytest.approx(0.05, abs=1e-6) and round(start / 0.05) * 0.05 == pytest.approx(start)
        assert start == last or emitted >= end - 0.001  # never before the window ended
    # The input idles 0.4 s before its last record: windows that ended before closed on time,
    # by their timers, not at the end of the input.
    ended = [emitted for _, _, end, _, emitted in windows if end <= fed_at[0] + 0.05]
    assert ended and max(ended) < fed_at[0] + 0.35, (max(ended) - fed_at[0])
    assert len({(k, s) for k, s, *_ in windows}) == len(windows)  # each (key, window) emitted once


def test_sliding_windows_hold_each_record_size_over_slide_times(cluster_with):
    def arrivals():
        for i in range(200):
            if i % 10 == 0:
                time.sleep(0.01)
            yield i

    with cluster_with(num_nodes=1, store_shards=1):
        flow = Dataflow("sliding", batch_size=5)
        (flow.source(arrivals()).key_by(lambda i: i % 2)
         .window(Sliding(0.09, 0.03), list, lambda acc, i: [*acc, i]).collect())
        windows = flow.run(timeout=120).outputs
    seen = collections.Counter(i for *_, records in windows for i in records)
    assert set(seen) == set(range(200)) and set(seen.values()) == {3}
    # Each window once: its bounds are whole microseconds, the same whichever record opened it.
    assert len({(key, start) for key, start, _, _ in windows}) == len(windows)


def test_an_operator_that_raises_fails_the_run_with_the_record_or_sets_it_aside(cluster_with):
    def parse(line):
        if "bad" in line:
            raise ValueError("not a number")
        return int(line)

    def slowly(lines):
        for line in lines:
            time.sleep(0.005)
            yield line

    lines = ["1", "2", "bad", "4"]
    with cluster_with(num_nodes=1, store_shards=1):
        flow = Dataflow("strict", batch_size=2, max_in_flight=50)
        flow.source(slowly([*lines, *map(str, range(400))])).map(parse, parallelism=1).collect()
        started = time.monotonic()
        with pytest.raises(RecordError, match="raised ValueError on record 'bad': not a number"):
            flow.run(timeout=60)
        # At once: not when the source (2 s of it) is done, nor when a result carrying it is awaited.
        assert time.monotonic() - started < 1.0

        flow = Dataflow("lenient", batch_size=2)
        flow.source(lines).map(parse, on_error="dead_letter").collect()
        result = flow.run(timeout=60)
    assert sorted(result.outputs) == [1, 2, 4]
    assert [(d.record, d.error) for d in result.dead_letters] == [("bad", "ValueError: not a number")]


def test_back_pressure_bounds_what_the_source_reads_ahead_of_a_slow_operator(cluster_with, tmp_path):
    done = tmp_path / "done"
    done.write_text("0")
    ahead = []

    def slow(record):
        time.sleep(0.002)
        count = int(Path(done).read_text()) + 1
        Path(f"{done}.new").write_text(str(count))
        os.replace(f"{done}.new", done)  # whole, so the source never reads a half-written count
        return record

    def source():
        for i in range(600):
            ahead.append(i - int(done.read_text()))
            yield i

    with cluster_with(num_nodes=1, store_shards=1):
        flow = Dataflow("slow", batch_size=10, max_in_flight=2)
        flow.source(source()).map(lambda i: i + 1, parallelism=1).map(slow).collect()
        assert sorted(flow.run(timeout=120).outputs) == list(range(1, 601))
    # Two stages of one instance, at most max_in_flight + 1 batches at each, plus the batch being read.
    assert max(ahead) <= 10 * (2 * (2 + 1) + 2), max(ahead)


def test_a_rollback_to_the_global_checkpoint_rewinds_a_pulled_flow_and_counts_stay_exact(cluster_with, tmp_path):
    """The nodes the rollback frontier names go back (or every node, when the failure comes while
    the next global checkpoint is being taken, which here is often); the driver's polls are
    acknowledgements, so it needs no rollback of its own, and either way the counts are exact."""
    text = _text(4000)
    oracle = collections.Counter(w for line in text for w in line.split())
    with cluster_with(num_nodes=2, store_shards=1, ft="checkpoint", checkpoint_dir=str(tmp_path / "ckpt")):
        flow = Dataflow("wordcount", batch_size=10, max_in_flight=2, checkpoint_every=None)
        (flow.source(ListSource(text))
         .map(KillNodeAt(2500, tmp_path / "killed", after=tmp_path / "checkpointed"))
         .flat_map(str.split, parallelism=2)
         .key_by(lambda word: word)
         .fold(lambda: 0, lambda n, word: n + 1, parallelism=2)
         .collect())
        stop = threading.Event()

        def global_checkpoints():  # the rollback baseline's driver
            while not stop.wait(0.1):
                with contextlib.suppress(actorrt.ActorRTError):
                    if flow.actors:
                        actorrt.checkpoint(flow.actors, timeout=30)
                        (tmp_path / "checkpointed").touch()  # the kill waits for one

        checkpointer = threading.Thread(target=global_checkpoints, daemon=True)
        checkpointer.start()
        try:
            result = flow.run(timeout=120)
        finally:
            stop.set()
            checkpointer.join()
        assert (tmp_path / "killed").exists() and any(n["epoch"] > 1 for n in actorrt.nodes())
    assert _final(result.outputs) == oracle  # what went back re-ran from its checkpointed state


def test_an_operator_whose_replay_diverges_stops_the_run_at_once(cluster_with, tmp_path):
    """A step that reads the clock without ``actorrt.now()`` sends other records when replayed:
    its downstream survivor sees the difference and the runtime stops the operator. The driver
    hears it from the flow's monitor at once, not when the source is done (the window is large
    enough that no producer would wait on the stopped operator before that)."""

    def stamp(record):
        return record, time.time_ns()

    def slowly(n):
        for i in range(n):
            time.sleep(0.01)
            yield i

    with cluster_with(num_nodes=2, store_shards=1):
        flow = Dataflow("clock", batch_size=5, max_in_flight=1000)
        # Stages alternate between the two nodes: the stamping one and its consumer are apart.
        (flow.source(slowly(3000))  # 30 s of input
         .map(str, parallelism=1)
         .map(KillNodeAt(40, tmp_path / "killed"), parallelism=1).map(stamp)
         .key_by(lambda stamped: stamped[0]).fold(lambda: 0, lambda n, stamped: n + 1)
         .collect())
        started = time.monotonic()
        with pytest.raises(OperatorStoppedError, match=r"stamp\)#0 was stopped: .*diverged"):
            flow.run(timeout=120)
        assert time.monotonic() - started < 15
