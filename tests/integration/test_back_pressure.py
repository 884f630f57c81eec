"""Back-pressure on plain actor calls (``options(max_in_flight=N)``) against real node processes.

The oracle is the host's clock: the consumer notes when it finished each call, the producer when
each ``.remote()`` returned. With a bound of N, call i can only have left once call i-N was
answered, so it was sent after call i-N finished; without a bound every call leaves at once.
"""

from __future__ import annotations

import time

import pytest

import actorrt
from tests.support.waiting import eventually

BOUND = 3
CALLS = 24


@actorrt.remote
class SlowConsumer:
    def __init__(self):
        self.finished = {}
        self.calls = 0

    def take(self, i):
        time.sleep(0.01)
        self.finished[i] = time.time()
        self.calls += 1
        return 2 * i

    def calls_taken(self):
        return self.calls

    def finish_times(self):
        return self.finished


@actorrt.remote
class Producer:
    async def produce(self, consumer, n):
        sent, refs = [], []
        for i in range(n):
            refs.append(await consumer.take.remote_async(i))
            sent.append(time.time())
        return sent, [await ref for ref in refs]

    def produce_without_waiting(self, consumer):
        return consumer.take.remote(0)


def _sent_after_answers(sent: list[float], finished: dict[int, float], bound: int) -> list[int]:
    """The calls that left before the call ``bound`` places earlier had finished."""
    return [i for i in range(bound, len(sent)) if sent[i] < finished[i - bound]]


def test_a_driver_blocks_while_its_channel_is_full(cluster):
    consumer = SlowConsumer.options(max_in_flight=BOUND).remote()
    sent, refs = [], []
    for i in range(CALLS):
        refs.append(consumer.take.remote(i))
        sent.append(time.time())
    assert actorrt.get(refs) == [2 * i for i in range(CALLS)]
    finished = actorrt.get(consumer.finish_times.remote())
    assert _sent_after_answers(sent, finished, BOUND) == []


def test_without_a_bound_calls_leave_at_once(cluster):
    """The control: the same calls, unbounded, all leave before the third one finishes."""
    consumer = SlowConsumer.remote()
    sent = []
    refs = []
    for i in range(CALLS):
        refs.append(consumer.take.remote(i))
        sent.append(time.time())
    actorrt.get(refs)
    finished = actorrt.get(consumer.finish_times.remote())
    assert len(_sent_after_answers(sent, finished, BOUND)) > CALLS // 2


def test_an_actor_awaits_room(cluster):
    consumer = SlowConsumer.options(node=1, max_in_flight=BOUND).remote()
    producer = Producer.options(node=0).remote()
    sent, results = actorrt.get(producer.produce.remote(consumer, CALLS))
    assert results == [2 * i for i in range(CALLS)]
    finished = actorrt.get(consumer.finish_times.remote())
    assert _sent_after_answers(sent, finished, BOUND) == []


def test_remote_inside_an_actor_on_a_bounded_handle_says_to_await(cluster):
    consumer = SlowConsumer.options(max_in_flight=BOUND).remote()
    producer = Producer.remote()
    with pytest.raises(actorrt.ActorRTError, match="remote_async"):
        actorrt.get(producer.produce_without_waiting.remote(consumer))


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "8"])
def test_max_in_flight_is_checked(bad):
    with pytest.raises(ValueError, match="max_in_flight"):
        SlowConsumer.options(max_in_flight=bad)


@actorrt.remote
class Chain:
    def __init__(self):
        self.steps = 0

    async def step(self, me, left):
        self.steps += 1
        if left:
            await me.step.remote_async(me, left - 1)  # a call to itself: its own running task is no room taken

    def count(self):
        return self.steps


def test_an_actor_calling_itself_through_a_bounded_handle_does_not_wait_on_itself(cluster):
    chain = Chain.options(max_in_flight=1).remote()
    chain.step.remote(chain, 5)
    assert eventually(lambda: actorrt.get(chain.count.remote(), timeout=10), lambda steps: steps == 6,
                      what="the chain of calls to itself to finish", timeout=10) == 6
