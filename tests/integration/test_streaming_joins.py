"""Flows with several sources on a cluster, with a node killed mid-run, against plain-Python
oracles: each source is read, and replayed, on its own (a pulled one from the offsets in its
lineage, the driver's from its logged batches), and each has its own watermark."""

from __future__ import annotations

import collections
import random

import pytest

from actorrt.streaming import Dataflow, EventTime, Fed, ListSource, Tumbling
from actorrt.streaming.testing import KillNodeAt


def _records(side: str, seed: int, n: int, keys: int, spacing: float) -> list[tuple[str, int, float, int]]:
    rng = random.Random(seed)
    return [(side, rng.randrange(keys), round(max(0.0, i * spacing - rng.uniform(0, 0.5)), 3), i) for i in range(n)]


LEFTS = _records("L", 1, 4000, 20, 0.01)
RIGHTS = _records("R", 2, 3000, 20, 0.013)


def _time(record):
    return record[2]


def _key(record):
    return record[1]


def _us(seconds: float) -> int:
    return round(seconds * 1e6)


def _flow(name: str, marker):
    """Left: a pulled source whose own operator's node is killed; right: the driver's, 2 instances."""
    flow = Dataflow(name, batch_size=50)
    time = EventTime(_time, max_delay_s=0.5)
    left = flow.source(ListSource(LEFTS), time=time, name="left").map(KillNodeAt(1500, marker))
    right = flow.source(RIGHTS, parallelism=2, time=time, name="right")
    return flow, left, right


def test_an_interval_join_of_a_pulled_and_a_driven_source_survives_the_pulled_sources_kill(cluster_with, tmp_path):
    with cluster_with(num_nodes=2, store_shards=1):
        flow, left, right = _flow("interval", tmp_path / "killed")
        left.key_by(_key).connect(right.key_by(_key)).interval_join(0.05, 0.1, parallelism=2).collect()
        result = flow.run(timeout=300)
    assert (tmp_path / "killed").exists()
    oracle = collections.Counter((lt[1], lt[3], rt[3]) for lt in LEFTS for rt in RIGHTS if lt[1] == rt[1]
                                 and _us(lt[2]) - _us(0.05) <= _us(rt[2]) <= _us(lt[2]) + _us(0.1))
    assert result.late == []
    assert collections.Counter((key, left[3], right[3]) for key, left, right in result.outputs) == oracle
    assert sum(oracle.values()) > 1000


def test_a_union_of_two_sources_into_windows_and_a_window_join_survive_a_kill(cluster_with, tmp_path):
    with cluster_with(num_nodes=2, store_shards=1):
        flow, left, right = _flow("union", tmp_path / "killed")
        left.union(right).key_by(_key).window(Tumbling(1.0), int, lambda n, r: n + 1, parallelism=2).collect()
        (left.key_by(_key).connect(right.key_by(_key))
         .window_join(Tumbling(2.0), parallelism=2)
         .map(lambda pair: (pair[0], pair[1][3], pair[2][3]))
         .collect("pairs"))
        result = flow.run(timeout=300)
    assert (tmp_path / "killed").exists()
    assert result.late == []
    counts = collections.Counter((r[1], _us(r[2]) // 1_000_000) for r in LEFTS + RIGHTS)
    assert {(key, round(start)): n for key, start, _, n in result.outputs} == dict(counts)
    assert len(result.outputs) == len(counts)
    pairs = collections.Counter((lt[1], lt[3], rt[3]) for lt in LEFTS for rt in RIGHTS
                                if lt[1] == rt[1] and _us(lt[2]) // 2_000_000 == _us(rt[2]) // 2_000_000)
    assert collections.Counter(result.collected["pairs"]) == pairs


def test_several_fed_sources_are_fed_by_name(cluster_with):
    with cluster_with(num_nodes=1, store_shards=1):
        flow = Dataflow("fed-by-name", batch_size=10)
        a = flow.source(Fed(), name="a")
        b = flow.source(Fed(), parallelism=2, name="b")
        a.map(lambda n: ("a", n)).union(b.map(lambda n: ("b", n))).key_by(lambda r: r[0]).fold(
            int, lambda total, r: total + r[1], emit="final").collect()
        running = flow.start(timeout=120)
        with pytest.raises(ValueError, match="several Fed"):
            running.feed([1])
        with pytest.raises(ValueError, match="no Fed.. source named 'c'"):
            running.feed([1], source="c")
        running.feed(range(100), source="a")
        running.feed(range(50), source="b")
        running.feed(range(50, 60), source="b")
        result = running.finish()
    assert sorted(result.outputs) == [("a", sum(range(100))), ("b", sum(range(60)))]
