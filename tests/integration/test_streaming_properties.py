"""Property: any event-time flow drawn at random (parallelism at the source and in the middle,
disorder within ``max_delay_s``, tumbling, sliding or session windows), on a real cluster with
the node of one of its operators SIGKILLed mid-stream, gives every window of a plain-Python
oracle, once, and nothing late. A few fixed examples here; ``scripts/streaming_properties.py``
runs it long."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given

import actorrt
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
