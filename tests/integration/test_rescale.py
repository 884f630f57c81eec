"""Rescaling a keyed stage while the flow runs (``RunningFlow.rescale``): counts stay exact against
a plain-Python oracle through 2 -> 4 -> 1 -> 3, with records flowing during each move and a node
killed during one; windows in event time move with their keys."""

from __future__ import annotations

import collections
import threading
import time

import pytest

import actorrt
from actorrt.streaming import Dataflow, EventTime, Fed, ListSource, Tumbling

TEXT = [f"w{i % 13} w{i % 7} x{i % 5}" for i in range(12_000)]


def counts(source) -> Dataflow:
    flow = Dataflow("rescaled", batch_size=25, checkpoint_every=50)
    (flow.source(source)
     .flat_map(str.split, parallelism=2)
     .key_by(lambda word: word)
     .fold(lambda: 0, lambda n, word: n + 1, parallelism=2, name="count")
     .collect())
    return flow


def test_counts_stay_exact_through_rescales_while_records_flow_and_a_node_dies(cluster, tmp_path):
    running = counts(ListSource(TEXT)).start(timeout=180)  # a pulled source: it reads during the moves
    time.sleep(0.2)
    killer = threading.Timer(0.05, actorrt.kill_node, (1,))
    killer.start()
    running.rescale("count", 4)
    killer.join()
    running.rescale(2, 1)
    running.rescale("count", 3)
    result = running.finish()
    final = collections.defaultdict(int)
    for word, n in result.outputs:
        final[word] = max(final[word], n)  # (a key's updates come from each instance that held it)
    assert dict(final) == collections.Counter(w for line in TEXT for w in line.split())
    assert actorrt.nodes()[1]["epoch"] >= 2  # the node died, during the first move
    named = {op["instance"] for op in result.operators if op["stage"] == 2}
    assert named == set(range(6))  # 2 at first, 2 added, 3 retired, 2 added: each a name of its own


def test_open_windows_move_with_their_keys(cluster):
    events = [(f"k{i % 9}", i * 0.01, 1) for i in range(3000)]  # 30 s of event time
    flow = Dataflow("windows", batch_size=20)
    (flow.source(Fed(), time=EventTime(lambda e: e[1]))
     .key_by(lambda e: e[0])
     .window(Tumbling(1.0), lambda: 0, lambda n, e: n + e[2], parallelism=2)
     .collect())
    running = flow.start(timeout=120)
    for part, parallelism in zip(range(0, 3000, 750), (3, 1, 2, 2), strict=True):
        running.feed(events[part:part + 750])
        running.rescale(1, parallelism)
    result = running.finish()
    got = collections.Counter()
    for key, start, _, n in result.outputs:
        assert (key, start) not in got
        got[(key, start)] = n
    assert got == collections.Counter((key, float(int(t))) for key, t, _ in events) and not result.late


def test_rescale_refuses_what_it_cannot_move(cluster):
    running = counts(Fed()).start(timeout=60)
    with pytest.raises(ValueError, match="has no keyed step"):
        running.rescale(1, 3)
    with pytest.raises(ValueError, match="no stage 'nope'"):
        running.rescale("nope", 3)
    with pytest.raises(ValueError, match="parallelism must be an int >= 1"):
        running.rescale(2, 0)
    running.cancel()


def test_a_rescaled_flow_stops_with_a_savepoint_and_resumes_from_it(cluster, tmp_path):
    running = counts(Fed()).start(timeout=60)
    parts = [TEXT[i:i + 300] for i in range(0, 1200, 300)]
    running.feed(parts[0])
    running.rescale("count", 1)
    running.feed(parts[1])
    running.rescale("count", 2)
    running.feed(parts[2])
    before = running.stop(savepoint=tmp_path / "sp")
    after = counts(Fed()).start(timeout=60, from_savepoint=tmp_path / "sp")
    after.feed(parts[3])
    result = after.finish()
    final = collections.defaultdict(int)
    for word, n in before.outputs + result.outputs:
        final[word] = max(final[word], n)
    assert dict(final) == collections.Counter(w for line in TEXT[:1200] for w in line.split())
    assert {op["instance"] for op in result.operators if op["stage"] == 2} == {0, 1}
