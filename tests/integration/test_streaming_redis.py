"""Dataflows between Redis streams (a real redis-server of the test's own, apart from the lineage
store), with an operator's node SIGKILLed at a chosen record: the output stream holds every
result exactly once, and a replayed source reads the same entries (their IDs are in its lineage)."""

from __future__ import annotations

import collections
import json

import pytest
import redis

import actorrt
from actorrt.streaming import Dataflow, EventTime, RedisStreamSink, RedisStreamSource, Tumbling, read_stream
from actorrt.streaming.testing import KillNodeAt


def _fill(url: str, stream: str, values) -> None:
    client = redis.Redis.from_url(url)
    for v in values:
        client.xadd(stream, {"v": json.dumps(v)})
    client.close()


def _killed_nodes() -> int:
    """Recoveries the live node processes made."""
    return sum(len(n["recoveries"]) for n in actorrt.stats()["nodes"])


@pytest.mark.parametrize("kill_stage", ["source", "map"])
def test_stream_to_stream_is_exactly_once_through_a_node_killed_at_a_record(cluster_with, streams, tmp_path,
                                                                             kill_stage):
    _fill(streams, "in", range(1500))
    with cluster_with(num_nodes=2, store_shards=1):
        flow = Dataflow("doubler", batch_size=25, max_in_flight=2)
        source = flow.source(RedisStreamSource(streams, "in", count=1500))
        if kill_stage == "source":
            source = source.map(KillNodeAt(600, tmp_path / "killed"))
        doubled = source.map(lambda v: 2 * v, parallelism=2)
        if kill_stage == "map":
            doubled = doubled.map(KillNodeAt(300, tmp_path / "killed"))
        doubled.sink(RedisStreamSink(streams, "out"))
        flow.run(timeout=180)
        assert (tmp_path / "killed").exists() and _killed_nodes() >= 1
    out = read_stream(streams, "out")
    assert collections.Counter(out) == collections.Counter(2 * v for v in range(1500))  # each exactly once
    client = redis.Redis.from_url(streams)
    marks = client.hgetall("out:written")
    client.close()
    assert len(marks) == 2  # one per writer (the two instances), not one per write...
    assert sum(int(n) for n in marks.values()) >= 1500 // 25  # ...of which there were a batch's worth each


def test_a_sink_write_made_again_appends_nothing_and_a_new_one_appends(streams):
    sink = RedisStreamSink(streams, "twice")
    sink.write("w", 1, ["a", "b"])
    sink.write("w", 2, ["c"])
    sink.write("w", 1, ["a", "b"])  # a replay of write 1
    sink.write("w", 2, ["c"])
    sink.write("other", 1, ["z"])
    sink.write("w", 3, ["d"])
    assert read_stream(streams, "twice") == ["a", "b", "c", "z", "d"]


def test_keyed_counts_from_a_stream_survive_a_kill_and_match_the_oracle(cluster_with, streams, tmp_path):
    words = [f"w{(i * 7) % 13}" for i in range(1200)]
    _fill(streams, "words", words)
    with cluster_with(num_nodes=2, store_shards=1):
        flow = Dataflow("counts", batch_size=20, max_in_flight=2)
        (flow.source(RedisStreamSource(streams, "words", count=len(words)))
         .map(KillNodeAt(500, tmp_path / "killed"), parallelism=2)
         .key_by(lambda w: w)
         .fold(lambda: 0, lambda n, w: n + 1, parallelism=2)
         .map(list)
         .sink(RedisStreamSink(streams, "counts")))
        flow.run(timeout=180)
        assert (tmp_path / "killed").exists() and _killed_nodes() >= 1
    updates = read_stream(streams, "counts")
    final = {}
    for word, n in updates:
        assert n > final.get(word, 0)  # a count only grows: no update written twice
        final[word] = n
    assert final == collections.Counter(words)


def test_event_time_windows_equal_the_oracle_through_two_kills(cluster_with, streams, tmp_path):
    # (user, event time in s, amount): times rise with some disorder, all within max_delay_s.
    events = [(f"u{i % 5}", i // 4 - (i * 7) % 3, i % 17) for i in range(1600)]
    _fill(streams, "events", events)
    with cluster_with(num_nodes=2, store_shards=1):
        flow = Dataflow("spend", batch_size=20, max_in_flight=2)
        (flow.source(RedisStreamSource(streams, "events", count=len(events)), time=EventTime(lambda e: e[1], 3))
         .map(KillNodeAt(400, tmp_path / "first"), parallelism=2)
         .map(KillNodeAt(650, tmp_path / "second"))  # the same stage, again, once the first replay is under way
         .key_by(lambda e: e[0])
         .window(Tumbling(10), lambda: 0, lambda total, e: total + e[2], parallelism=2)
         .map(list)
         .sink(RedisStreamSink(streams, "windows")))
        result = flow.run(timeout=180)
        # Both kills happened (a node's stats list the recoveries of its current process only).
        assert (tmp_path / "first").exists() and (tmp_path / "second").exists() and _killed_nodes() >= 1
    oracle = collections.Counter()
    for user, t, amount in events:
        oracle[(user, t - t % 10)] += amount
    windows = read_stream(streams, "windows")
    assert sorted((user, start) for user, start, _, _ in windows) == sorted(oracle)  # each window once
    assert {(user, start): total for user, start, _, total in windows} == dict(oracle)
    assert all(end - start == 10 for _, start, end, _ in windows) and result.late == []
