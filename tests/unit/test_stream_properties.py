"""Property: any event-time flow drawn at random (parallelism at the source and in the middle,
disorder within ``max_delay_s``, tumbling, sliding or session windows), with its messages
delivered in any order, gives every window of a plain-Python oracle, once, and nothing late.
In one process (``tests/support/local_flow.py``); the same property on a real cluster, with a
node killed, is in tests/integration/test_streaming_properties.py."""

from __future__ import annotations

from hypothesis import given

from actorrt.streaming import Fed
from tests.support.flows import FlowCase, flow_cases, property_settings, windows_of
from tests.support.local_flow import LocalFlow


@property_settings(ci_examples=200)
@given(flow_cases())
def test_any_event_time_flow_in_any_delivery_order_equals_the_oracle(case: FlowCase):
    events = case.events()
    local = LocalFlow(case.build(Fed()).plan, case.seed)
    local.feed(events)
    result = local.finish()
    assert result.late == []
    assert windows_of(result.outputs) == case.oracle(events)
