"""Remote functions under node failures: a call cut short runs again, and an actor that calls
functions is replayed exactly (each call's result counted once)."""

from __future__ import annotations

import sys
import time

import cloudpickle

import actorrt
from tests.integration.test_remote_functions import Summer, add_squares, slow

cloudpickle.register_pickle_by_value(sys.modules[__name__])


def test_a_call_whose_node_dies_runs_again_and_gives_the_same_value(fresh_cluster):
    victim = actorrt.nodes()[1]["pid"]
    running = slow.options(node=1).remote(5, 2.0)
    nested = add_squares.options(node=1).remote(1, 2, 3)
    time.sleep(0.5)
    actorrt.kill_node(1)
    value, pid = actorrt.get(running, timeout=60)
    assert value == 5 and pid != victim
    assert actorrt.get(nested, timeout=60) == sum(x * x for x in (1, 2, 3))


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
