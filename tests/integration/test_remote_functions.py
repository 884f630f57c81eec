"""Remote functions (``@actorrt.remote def f``): stateless calls on the nodes, logged like any
task, run again where a failure cuts them short, and replayed exactly by the actors that call them."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import cloudpickle
import numpy as np
import pytest

import actorrt
from actorrt.core import context
from actorrt.lineage import ids
from tests.support.waiting import eventually

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@actorrt.remote
def square(x):
    return x * x


@actorrt.remote
def where(x):
    return x, os.getpid()


@actorrt.remote
def slow(x, seconds):
    time.sleep(seconds)
    return x, os.getpid()


@actorrt.remote
async def add_squares(*xs, scale=1):
    refs = [square.remote(x) for x in xs]  # calls of its own, on any node
    return scale * sum([await r for r in refs])


@actorrt.remote
def fails(x):
    raise ValueError(f"no {x}")


@actorrt.remote
def records():
    return actorrt.record(time.time)


@actorrt.remote
def enqueue_all(queue, key, n):
    last = None
    for item in range(n):
        last = queue.enqueue.remote(key, item)
    return actorrt.get(last, timeout=30)  # a blocking get: the call runs off the node's loop


@actorrt.remote
def summer_of(*xs):
    summer = Summer.remote()  # placed by its ID: a re-run of this call reaches the same actor
    actorrt.get([summer.add.remote(x) for x in xs], timeout=30)
    return summer


@actorrt.remote
class Summer:
    def __init__(self):
        self.total = 0

    async def add(self, x):
        self.total += await square.remote(x)
        return self.total

    def pid(self):
        return os.getpid()


@actorrt.remote
class Queue:
    def __init__(self):
        self.items = []

    def enqueue(self, key, item):
        self.items.append((key, item))
        return len(self.items)

    def read(self):
        return self.items


def test_calls_spread_over_the_nodes_and_return_what_plain_python_does(cluster):
    pids = {n["pid"] for n in actorrt.nodes()}
    results = actorrt.get([where.remote(i) for i in range(20)], timeout=30)
    assert [x for x, _ in results] == list(range(20))
    assert {pid for _, pid in results} == pids
    assert actorrt.get(where.options(node=1).remote(0), timeout=30)[1] == actorrt.nodes()[1]["pid"]
    big = np.arange(300_000, dtype=np.float64)  # over inline_max_bytes: it travels beside the call
    assert actorrt.get(square.remote(big), timeout=30).sum() == pytest.approx(float((big * big).sum()))
    refs = [square.remote(i) for i in range(5)]
    # Refs as arguments are resolved first; keywords; an async function that calls functions.
    assert actorrt.get(add_squares.remote(*refs, scale=2), timeout=30) == 2 * sum(i ** 4 for i in range(5))


def test_errors_are_the_remote_type_and_misuse_says_what_to_do(cluster):
    with pytest.raises(ValueError, match="no 3") as caught:
        actorrt.get(fails.remote(3), timeout=30)
    assert isinstance(caught.value, actorrt.TaskError)
    trace = caught.value.remote_traceback
    assert "raise ValueError" in trace and "function_calls.py" not in trace
    with pytest.raises(TypeError, match=r"call remote function square with square.remote\(...\)"):
        square(2)
    with pytest.raises(actorrt.TaskError, match="record\\(\\) in remote function records"):
        actorrt.get(records.remote(), timeout=30)
    with pytest.raises(TypeError, match="unknown remote-function option num_returns: the options are node "
                                        "\\(num_returns is Ray's: here, return a tuple, and get it whole\\)"):
        square.options(num_returns=2)
    with pytest.raises(actorrt.ClusterError, match="node 7 is not a live node"):
        square.options(node=7).remote(1)
    with pytest.raises(TypeError, match="takes a class or a function, not a int"):
        actorrt.remote(5)


def test_calls_call_actors_through_handles_they_are_passed_and_create_actors(cluster):
    queue = Queue.remote()
    forks = [enqueue_all.remote(queue, key, 10) for key in range(6)]
    for item in range(10):  # the driver's own calls, beside the functions'
        mine = queue.enqueue.remote(6, item)
    actorrt.get([*forks, mine], timeout=60)
    items = actorrt.get(queue.read.remote(), timeout=30)
    assert len(items) == 70
    for key in range(7):  # each sender's calls run once each, in its order
        assert [item for k, item in items if k == key] == list(range(10))
    summers = actorrt.get([summer_of.remote(*range(i)) for i in range(1, 5)], timeout=60)
    assert actorrt.get([s.add.remote(0) for s in summers], timeout=30) == [
        sum(x * x for x in range(i)) for i in range(1, 5)]


def test_a_call_is_cancelled_while_it_waits_for_its_arguments(cluster):
    summer = Summer.options(node=0).remote()

    @actorrt.remote
    class Gate:
        async def after(self, seconds):
            await asyncio.sleep(seconds)
            return 3

    late = Gate.options(node=1).remote().after.remote(1.0)
    waiting = square.options(node=0).remote(late)
    time.sleep(0.3)
    actorrt.cancel(waiting)
    with pytest.raises(actorrt.TaskCancelledError, match="call of remote function square was cancelled"):
        actorrt.get(waiting, timeout=30)
    assert actorrt.get(square.remote(late), timeout=30) == 9
    assert actorrt.get(summer.add.remote(2), timeout=30) == 4


def test_a_call_is_logged_in_the_lineage_store_like_any_task(cluster):
    ref = square.options(node=1).remote(7)
    assert actorrt.get(ref, timeout=30) == 49
    task_id = ids.producer_task(ref.object_id)
    store = context.current().worker.ft.store
    held = eventually(lambda: context.current().call(store.read([task_id])), what="the call's spec in the store")
    spec = held[task_id]
    assert spec.receiver == ids.FUNCTIONS and spec.method == "square"
    assert cloudpickle.loads(spec.function)(3) == 9
