"""Remote functions under node failures: a call cut short runs again, and an actor that calls
functions is replayed exactly (each call's result counted once)."""

from __future__ import annotations

import sys
import time

import cloudpickle

import actorrt
from tests.integration.test_remote_functions import Queue, Summer, add_squares, slow
from tests.support.waiting import eventually

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@actorrt.remote
def enqueue_slowly(queue, key, n):
    helper = Summer.remote()  # created by the call: a re-run reaches the same one
    total = actorrt.get(helper.add.remote(n), timeout=60)
    for item in range(n):
        actorrt.get(queue.enqueue.remote(key, item), timeout=60)
        time.sleep(0.05)
    return total, helper


def test_calls_whose_node_dies_run_again_give_the_same_values_and_their_calls_to_actors_apply_once(
        fresh_cluster):
    victim = actorrt.nodes()[1]["pid"]
    queue = Queue.options(node=0).remote()
    enqueuing = [enqueue_slowly.options(node=1).remote(queue, key, 30) for key in range(3)]
    eventually(lambda: len(actorrt.get(queue.read.remote(), timeout=30)), lambda n: n >= 6,
               what="the calls under way")
    running = slow.options(node=1).remote(5, 2.0)
    nested = add_squares.options(node=1).remote(1, 2, 3)
    time.sleep(0.5)
    assert len(actorrt.get(queue.read.remote(), timeout=30)) < 90
    actorrt.kill_node(1)
    value, pid = actorrt.get(running, timeout=60)
    assert value == 5 and pid != victim
    assert actorrt.get(nested, timeout=60) == sum(x * x for x in (1, 2, 3))
    results = actorrt.get(enqueuing, timeout=90)
    assert [total for total, _ in results] == [30 * 30] * 3
    items = actorrt.get(queue.read.remote(), timeout=30)
    for key in range(3):  # the re-run's calls the first run made were answered, not applied again
        assert [item for k, item in items if k == key] == list(range(30))
    for _, helper in results:  # the actor each call created: its one add, once
        assert actorrt.get(helper.add.remote(1), timeout=30) == 30 * 30 + 1
    summers = [a for n in actorrt.stats()["nodes"] for a in n["actors"] if a["class"] == "Summer"]
    assert sorted(a["actor_id"] for a in summers) == sorted(h.actor_id.hex() for _, h in results)


def test_an_actor_that_calls_functions_is_replayed_exactly_after_its_node_dies(fresh_cluster):
    summer = Summer.options(node=1).remote()
    victim = actorrt.get(summer.pid.remote(), timeout=30)
    xs = list(range(1, 41))
    first = [summer.add.remote(x) for x in xs[:20]]
    actorrt.get(first[:5], timeout=30)
    actorrt.kill_node(1)
    rest = [summer.add.remote(x) for x in xs[20:]]
    totals = actorrt.get(first + rest, timeout=90)
    oracle = [sum(x * x for x in xs[:i + 1]) for i in range(len(xs))]  # plain Python: each square added once
    assert totals == oracle
    assert actorrt.get(summer.pid.remote(), timeout=30) != victim
