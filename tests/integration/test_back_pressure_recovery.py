"""Back-pressure across a failure: calls in flight to an actor whose node is SIGKILLed are
answered by its replay, so the producer's window frees up; nothing is lost or run twice (the
oracle: the results are 2·i for every i, and the consumer finished each call exactly once)."""

from __future__ import annotations

import time

import pytest

import actorrt
from tests.integration.test_back_pressure import Producer, SlowConsumer


@pytest.mark.parametrize("killed", ["consumer", "producer"])
def test_the_window_survives_a_killed_node(fresh_cluster, killed):
    """Calls in flight to an actor whose node dies are answered by its replay, and a producer
    rebuilt by replay waits for room again where it did: nothing is lost, nothing runs twice."""
    consumer = SlowConsumer.options(node=1 if killed == "consumer" else 0, max_in_flight=3).remote()
    producer = Producer.options(node=1 if killed == "producer" else 0).remote()
    ref = producer.produce.remote(consumer, 60)
    time.sleep(0.3)
    actorrt.kill_node(1)
    _, results = actorrt.get(ref, timeout=60)
    assert results == [2 * i for i in range(60)]
    assert sorted(actorrt.get(consumer.finish_times.remote(), timeout=30)) == list(range(60))
    assert actorrt.get(consumer.calls_taken.remote()) == 60
