"""Property: any event-time flow drawn at random (parallelism at the source and in the middle,
disorder within ``max_delay_s``, tumbling, sliding or session windows), on a real cluster with
the node of one of its operators SIGKILLed mid-stream, gives every window of a plain-Python
oracle, once, and nothing late; and any interval or window join of two sources, with a source's
node killed, gives every pair of the oracle once. A few fixed examples here;
``scripts/streaming_properties.py`` runs them long."""

from __future__ import annotations

import collections
import itertools
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import actorrt
from actorrt.streaming import Dataflow, EventTime, Tumbling
from actorrt.streaming.testing import KillNodeAt
from tests.support.flows import FlowCase, flow_cases, property_settings, windows_of

_runs = itertools.count()


@pytest.fixture(scope="module")
def two_nodes():
    actorrt.init(num_nodes=2, store_shards=1)
    try:
        yield
    finally:
        actorrt.shutdown()


@property_settings(ci_examples=6)
@given(case=flow_cases(records=(300, 2000), kill=True))
def test_any_event_time_flow_with_a_node_killed_equals_the_oracle(two_nodes, tmp_path_factory, case: FlowCase):
    marker = tmp_path_factory.mktemp("kill") / "killed"
    events = case.events()
    result = case.build(events, name=f"case{next(_runs)}", marker=str(marker)).run(timeout=120)
    assert marker.exists()  # the node died mid-stream
    assert result.late == []
    assert windows_of(result.outputs) == case.oracle(events)


@st.composite
def join_cases(draw: Any) -> dict[str, Any]:
    n = draw(st.integers(200, 1500))
    return {"seed": draw(st.integers(0, 2**32)), "records": n, "keys": draw(st.integers(1, 8)),
            "disorder": draw(st.sampled_from([0.0, 0.3, 1.0])), "kind": draw(st.sampled_from(["interval", "window"])),
            "before": draw(st.sampled_from([0.0, 0.2, 1.0])), "after": draw(st.sampled_from([0.0, 0.5])),
            "window": draw(st.sampled_from([0.5, 2.0])), "parallelism": draw(st.tuples(*[st.integers(1, 2)] * 3)),
            "batch": draw(st.integers(1, 40)), "kill_at": draw(st.integers(1, max(1, n // 4)))}


def _side(name: str, seed: int, n: int, keys: int, disorder: float) -> list[tuple[str, int, float, int]]:
    rng = random.Random(seed)
    return [(name, rng.randrange(keys), round(max(0.0, i * 0.01 - rng.uniform(0, disorder)), 3), i) for i in range(n)]


def _us(seconds: float) -> int:
    return round(seconds * 1e6)


@property_settings(ci_examples=3)
@given(case=join_cases())
def test_any_join_of_two_sources_with_a_node_killed_gives_the_oracles_pairs(two_nodes, tmp_path_factory, case):
    """Two driven sources, their own watermarks, an interval or a window join at random
    parallelism; the node of a left source instance is SIGKILLed at a random record."""
    marker = tmp_path_factory.mktemp("kill") / "killed"
    lefts = _side("L", case["seed"], case["records"], case["keys"], case["disorder"])
    rights = _side("R", case["seed"] + 1, case["records"], case["keys"], case["disorder"])
    left_p, right_p, join_p = case["parallelism"]
    flow = Dataflow(f"join{next(_runs)}", batch_size=case["batch"], max_in_flight=4)
    time = EventTime(lambda r: r[2], max_delay_s=case["disorder"])
    left = flow.source(lefts, parallelism=left_p, time=time, name="left").map(KillNodeAt(case["kill_at"], marker))
    right = flow.source(rights, parallelism=right_p, time=time, name="right")
    joined = left.key_by(lambda r: r[1]).connect(right.key_by(lambda r: r[1]))
    if case["kind"] == "interval":
        joined.interval_join(case["before"], case["after"], parallelism=join_p).collect()
    else:
        joined.window_join(Tumbling(case["window"]), parallelism=join_p).collect()
    result = flow.run(timeout=120)
    assert marker.exists()
    assert result.late == []
    oracle = collections.Counter((lt[1], lt[3], rt[3]) for lt in lefts for rt in rights
                                 if lt[1] == rt[1] and _pairs(case, lt, rt))
    assert collections.Counter((key, lt[3], rt[3]) for key, lt, rt in result.outputs) == oracle


def _pairs(case: dict[str, Any], left: tuple, right: tuple) -> bool:
    """Whether the join of ``case`` pairs ``left`` with ``right`` (keys aside), in µs as the
    operators hold times."""
    if case["kind"] == "interval":
        return _us(left[2]) - _us(case["before"]) <= _us(right[2]) <= _us(left[2]) + _us(case["after"])
    size = _us(case["window"])
    return _us(left[2]) // size == _us(right[2]) // size
