"""Every Nexmark query as a dataflow, in one process (``tests/support/local_flow.py``) with its
messages delivered in seeded random orders, against a plain-Python computation of its answer over
the same events (``tests/support/nexmark_oracles.py``). On a cluster, with a node killed:
tests/integration/test_streaming_nexmark.py."""

from __future__ import annotations

import pytest

from actorrt.streaming import Dataflow, EventTime, Fed, nexmark
from actorrt.streaming import nexmark_queries as queries
from tests.support import nexmark_oracles as oracles
from tests.support.local_flow import LocalFlow

RATE = 1_000.0
EVENTS = list(nexmark.events(20_000, seed=3, rate=RATE))  # 20 s of event time


def _time(event: nexmark.Event) -> float:
    return event.date_time


@pytest.mark.parametrize("name", oracles.QUERIES)
def test_a_nexmark_query_in_any_delivery_order_gives_the_oracles_answer(name):
    flow = Dataflow(f"nexmark-{name}", batch_size=100)
    events = flow.source(Fed(), parallelism=2, time=EventTime(_time))
    queries.query(name, events, RATE).collect()
    local = LocalFlow(flow.plan, seed=len(name) * 7)
    local.feed(EVENTS)
    result = local.finish()
    assert result.late == []
    answer = oracles.answer(name, result.outputs)
    assert answer == oracles.oracle(name, EVENTS)
    assert answer  # (each query has results on this input)
