"""Stopping a flow that never ends with a savepoint, and starting it again from it: on a new
cluster (the whole first one shut down), at other parallelism. Counts and windows equal a
plain-Python oracle over all the input, each once."""

from __future__ import annotations

import collections
import time

import pytest

from actorrt.streaming import Dataflow, EventTime, Fed, ListSource, SavepointError, Tumbling

TEXT = [f"w{i % 7} w{i % 3} x{i % 11}" for i in range(400)]


def wordcount(split: int, count: int, source=None) -> Dataflow:
    flow = Dataflow("resumable", batch_size=20)
    (flow.source(Fed() if source is None else source)
     .flat_map(str.split, parallelism=split)
     .key_by(lambda word: word)
     .fold(lambda: 0, lambda n, word: n + 1, parallelism=count)
     .collect())
    return flow


def windows(parallelism: int) -> Dataflow:
    flow = Dataflow("windows", batch_size=10)
    (flow.source(Fed(), parallelism=2, time=EventTime(lambda e: e[1]))
     .key_by(lambda e: e[0])
     .window(Tumbling(1.0), lambda: 0, lambda total, e: total + e[2], parallelism=parallelism)
     .collect())
    return flow


def test_a_flow_stopped_with_a_savepoint_resumes_on_a_new_cluster_at_other_parallelism(cluster_with, tmp_path):
    savepoint = tmp_path / "savepoint"
    half = len(TEXT) // 2
    with cluster_with(num_nodes=2, store_shards=1):
        running = wordcount(split=2, count=2).start(timeout=60)
        running.feed(TEXT[:half])
        before = running.stop(savepoint=savepoint, timeout=60)
        assert not running.active
        # What was read before the stop was all processed: the counts so far are exact.
        assert dict(before.outputs) == collections.Counter(w for line in TEXT[:half] for w in line.split())
        with pytest.raises(ValueError, match="finished or cancelled"):
            running.feed(["too late"])
    assert (savepoint / "manifest.json").exists()
    with cluster_with(num_nodes=2, store_shards=1):
        running = wordcount(split=1, count=3).start(timeout=60, from_savepoint=savepoint)
        running.feed(TEXT[half:])
        after = running.finish()
    assert dict(after.outputs) == collections.Counter(w for line in TEXT for w in line.split())


def test_open_windows_and_the_watermark_survive_a_savepoint(cluster_with, tmp_path):
    events = [(f"k{i % 5}", i * 0.05, i) for i in range(200)]  # 10 s of event time, 20 events a second
    oracle = collections.Counter()
    for key, t, value in events:
        oracle[(key, float(int(t)), float(int(t) + 1))] += value
    with cluster_with(num_nodes=2, store_shards=1):
        running = windows(parallelism=2).start(timeout=60)
        running.feed(events[:110])  # 5.5 s: the window [5, 6) is open at the stop
        before = running.stop(savepoint=tmp_path / "sp", timeout=60)
        running = windows(parallelism=1).start(timeout=60, from_savepoint=tmp_path / "sp")
        running.feed(events[110:])
        after = running.finish()
    got = collections.Counter()
    for key, start, end, total in before.outputs + after.outputs:
        assert (key, start, end) not in got  # each window once
        got[(key, start, end)] = total
    assert got == oracle and not before.late and not after.late


def test_a_pulled_source_resumes_where_it_stopped_reading(cluster, tmp_path):
    text = TEXT * 25  # 10,000 lines: long enough to stop in the middle
    running = wordcount(split=2, count=2, source=ListSource(text)).start(timeout=120)
    time.sleep(0.3)
    before = running.stop(savepoint=tmp_path / "sp", timeout=60)
    read = sum(op["in"] for op in before.operators if op["stage"] == 0)
    assert 0 < read < len(text)
    resumed = wordcount(split=2, count=2, source=ListSource(text)).start(timeout=120, from_savepoint=tmp_path / "sp")
    after = resumed.finish()
    assert sum(op["in"] for op in after.operators if op["stage"] == 0) == len(text) - read
    assert dict(after.outputs) == collections.Counter(w for line in text for w in line.split())


def test_a_savepoint_of_other_stages_or_none_is_refused_with_what_differs(cluster, tmp_path):
    with pytest.raises(SavepointError, match="no savepoint at"):
        wordcount(split=1, count=1).start(from_savepoint=tmp_path / "nothing")
    running = wordcount(split=1, count=1).start(timeout=60)
    running.feed(TEXT[:10])
    running.stop(savepoint=tmp_path / "sp")
    other = Dataflow("other")
    other.source(Fed()).map(str.upper).collect()
    with pytest.raises(SavepointError, match="is of a flow with stages"):
        other.start(from_savepoint=tmp_path / "sp")
