"""The public API's semantics across real node processes."""

from __future__ import annotations

import asyncio
import os
import pickle
import subprocess
import sys
import threading
import time

import cloudpickle
import numpy as np
import pytest

import actorrt
from actorrt.core import context
from actorrt.handles import ActorHandle
from actorrt.lineage import ids

# Node processes cannot import this module: what its actors use of it travels by value, as what a
# script defines in __main__ does.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@actorrt.remote
class Counter:
    def __init__(self, start=0):
        self.n = start
        self.log = []

    def add(self, k):
        self.n += k
        return self.n

    def record(self, who, i):
        self.log.append((who, i))

    def get_log(self):
        return self.log

    async def relay(self, other, k):
        return await other.add.remote(k)

    async def add_later(self, k, delay):
        await asyncio.sleep(delay)
        return self.add(k)

    def fail(self, msg):
        raise ValueError(msg)

    def sleep(self, seconds):
        time.sleep(seconds)
        return seconds

    def sum_array(self, arr):
        return float(arr.sum()), arr.dtype.str, arr.shape

    def double(self, arr):
        return arr * 2

    def exit(self):
        raise SystemExit(3)

    async def cancelled(self):
        fut = asyncio.get_running_loop().create_future()
        fut.cancel()
        return await fut

    def where(self):
        import os

        return os.getpid()


@actorrt.remote
class Broken:
    def __init__(self):
        raise RuntimeError("no config")

    def f(self):
        return 1


def test_readme_example(cluster):
    a = Counter.options(node=0).remote(10)
    b = Counter.options(node=1, nondeterministic=True).remote()
    ref = a.add.remote(5)
    assert isinstance(ref, actorrt.ObjectRef)
    assert actorrt.get(ref, timeout=30) == 15
    assert actorrt.get(a.relay.remote(b, 2), timeout=30) == 2
    assert actorrt.get(b.add.remote(a.add.remote(1)), timeout=30) == 2 + 16


def test_placement_by_node_and_spread(cluster):
    pids = {n["node"]: n["pid"] for n in actorrt.nodes()}
    on0 = Counter.options(node=0).remote()
    on1 = Counter.options(node=1).remote()
    assert actorrt.get([on0.where.remote(), on1.where.remote()], timeout=30) == [pids[0], pids[1]]
    spread = [Counter.remote() for _ in range(4)]
    where = actorrt.get([h.where.remote() for h in spread], timeout=30)
    assert set(where) == {pids[0], pids[1]}
    with pytest.raises(actorrt.ClusterError, match="not a live node"):
        Counter.options(node=7).remote()


def test_tasks_of_one_sender_run_in_submission_order(cluster):
    a = Counter.options(node=1).remote()
    # The slow first task must not be overtaken by the fast ones behind it.
    refs = [a.add_later.remote(1, 0.05)] + [a.add.remote(1) for _ in range(200)]
    assert actorrt.get(refs, timeout=60) == list(range(1, 202))


def test_ref_argument_waits_for_its_producer(cluster):
    a = Counter.options(node=0).remote()
    b = Counter.options(node=1).remote(100)
    slow = a.add_later.remote(7, 0.2)
    assert actorrt.get(b.add.remote(slow), timeout=30) == 107
    assert actorrt.get(b.add.remote(k=a.add.remote(1)), timeout=30) == 115


def test_handles_are_picklable_and_usable_inside_actors(cluster):
    a = Counter.options(node=0).remote()
    b = Counter.options(node=1).remote()
    clone = pickle.loads(pickle.dumps(b))
    assert clone == b
    assert actorrt.get(a.relay.remote(clone, 3), timeout=30) == 3
    assert actorrt.get(b.add.remote(0), timeout=30) == 3


def test_await_ref_from_a_driver_event_loop(cluster):
    a = Counter.options(node=0).remote()

    async def main():
        return await a.add.remote(4), await asyncio.gather(a.add.remote(1), a.add.remote(1))

    assert asyncio.run(main()) == (4, [5, 6])


def test_task_error_carries_remote_details_and_actor_keeps_serving(cluster):
    a = Counter.options(node=1).remote()
    with pytest.raises(actorrt.TaskError) as info:
        actorrt.get(a.fail.remote("bad input"), timeout=30)
    err = info.value
    assert err.type_name == "builtins.ValueError"
    assert err.remote_message == "bad input"
    assert "in fail" in err.remote_traceback and "raise ValueError(msg)" in err.remote_traceback
    assert actorrt.get(a.add.remote(1), timeout=30) == 1


class OverdrawnError(Exception):
    """An exception whose constructor takes other arguments than its message."""

    def __init__(self, account, amount):
        super().__init__(f"account {account} is short of {amount}")
        self.account = account


@actorrt.remote
class Bank:
    def withdraw(self, account, amount):
        raise OverdrawnError(account, amount)

    def lookup(self, key):
        return {}[key]

    async def relay_lookup(self, other, key):
        return await other.lookup.remote(key)


def test_a_task_error_is_also_an_instance_of_the_remote_type_with_the_users_frames(cluster):
    bank, front = Bank.options(node=1).remote(), Bank.options(node=0).remote()
    with pytest.raises(KeyError) as info:  # caught as the type the method raised
        actorrt.get(bank.lookup.remote("k"), timeout=30)
    err = info.value
    assert isinstance(err, actorrt.TaskError) and isinstance(err, actorrt.ActorRTError)
    assert err.type_name == "builtins.KeyError" and "'k'" in str(err)
    assert "in lookup" in err.remote_traceback and "return {}[key]" in err.remote_traceback
    assert "actorrt/core" not in err.remote_traceback  # the runtime's frames are left out
    with pytest.raises(OverdrawnError) as info:  # a constructor of its own: the class still comes across
        actorrt.get(bank.withdraw.remote("A-1", 5), timeout=30)
    assert isinstance(info.value, actorrt.TaskError) and "account A-1 is short of 5" in str(info.value)
    with pytest.raises(KeyError):  # re-raised by an actor that awaited it: still the original type
        actorrt.get(front.relay_lookup.remote(bank, "k"), timeout=30)


def test_base_exceptions_in_methods_are_task_errors_too(cluster):
    a = Counter.options(node=0).remote()
    with pytest.raises(actorrt.TaskError, match="SystemExit"):
        actorrt.get(a.exit.remote(), timeout=30)
    with pytest.raises(actorrt.TaskError, match="CancelledError"):
        actorrt.get(a.cancelled.remote(), timeout=30)
    assert actorrt.get(a.add.remote(1), timeout=30) == 1


def test_error_propagates_through_a_ref_argument(cluster):
    a = Counter.options(node=0).remote()
    b = Counter.options(node=1).remote()
    with pytest.raises(actorrt.TaskError, match="upstream"):
        actorrt.get(b.add.remote(a.fail.remote("upstream")), timeout=30)


def test_missing_method_is_a_clear_error(cluster):
    a = Counter.options(node=0).remote()
    with pytest.raises(actorrt.ActorMethodError, match="no method 'nope' \\(it has: add, "):
        a.nope.remote()
    # A handle that believes in a method the class lacks: the node answers NO_SUCH_METHOD.
    liar = ActorHandle(a.actor_id, "Counter", a.methods + ("nope",), a.slot)
    with pytest.raises(actorrt.ActorMethodError, match="no method 'nope'"):
        actorrt.get(liar.nope.remote(), timeout=30)
    assert actorrt.get(a.add.remote(2), timeout=30) == 2


def test_unknown_actor_is_an_error_not_a_hang(cluster):
    ghost = ActorHandle(ids.actor_id(b"nobody", 1), "Counter", ("add",), 0)
    with pytest.raises(actorrt.UnknownActorError):
        actorrt.get(ghost.add.remote(1), timeout=30)


def test_failed_constructor_kills_the_actor(cluster):
    b = Broken.options(node=0).remote()
    with pytest.raises(actorrt.ActorDiedError, match="RuntimeError: no config"):
        actorrt.get(b.f.remote(), timeout=30)


def test_get_timeout(cluster):
    a = Counter.options(node=1).remote()
    with pytest.raises(actorrt.GetTimeoutError):
        actorrt.get(a.sleep.remote(1.0), timeout=0.1)
    with pytest.raises(TimeoutError):  # GetTimeoutError is a TimeoutError
        actorrt.get(a.sleep.remote(0.5), timeout=0.05)
    assert actorrt.get(a.add.remote(1), timeout=30) == 1


def test_get_with_timeout_zero_returns_what_is_ready_and_wait_splits_ready_from_not(cluster):
    a, b = Counter.options(node=0).remote(), Counter.options(node=1).remote()
    done = a.add.remote(1)
    assert actorrt.get(done, timeout=30) == 1
    assert actorrt.get(done, timeout=0) == 1  # a poll: ready now
    assert actorrt.get([done, done], timeout=0) == [1, 1]
    slow = b.sleep.remote(1.0)
    with pytest.raises(actorrt.GetTimeoutError, match="1 of 2 values were not ready"):
        actorrt.get([done, slow], timeout=0)

    fast, failing = a.add.remote(1), a.fail.remote("no")
    ready, not_ready = actorrt.wait([slow, fast], num_returns=1)
    assert (ready, not_ready) == ([fast], [slow])
    assert actorrt.wait([slow, done], num_returns=2, timeout=0) == ([done], [slow])
    ready, _ = actorrt.wait([failing, slow], timeout=30)  # an error is ready too
    assert ready == [failing]
    with pytest.raises(ValueError, match="no"):
        actorrt.get(failing, timeout=0)
    assert actorrt.wait([slow, fast], num_returns=2, timeout=30) == ([slow, fast], [])
    with pytest.raises(ValueError, match="num_returns must be an int from 1 to len"):
        actorrt.wait([fast], num_returns=2)
    with pytest.raises(TypeError, match="a list of ObjectRefs"):
        actorrt.wait(fast)
    with pytest.raises(ValueError, match="same ref twice"):
        actorrt.wait([fast, fast])


@actorrt.remote
class Putter:
    def make(self, k):
        return [actorrt.put(np.full(1000, k))]  # a ref inside a result: a nested ref

    def total(self, arr):
        return float(arr.sum())


def test_put_makes_a_ref_that_tasks_and_gets_use_like_a_result(cluster):
    big = np.arange(200_000, dtype=np.float64)
    ref = actorrt.put(big)
    assert isinstance(ref, actorrt.ObjectRef)
    assert actorrt.get(ref, timeout=0).sum() == big.sum()
    users = [Putter.options(node=i % 2).remote() for i in range(4)]
    assert actorrt.get([u.total.remote(ref) for u in users for _ in range(3)], timeout=30) == [big.sum()] * 12
    [inner] = actorrt.get(users[1].make.remote(7), timeout=30)
    assert actorrt.get(inner, timeout=30).tolist() == [7] * 1000
    assert actorrt.get(users[0].total.remote(inner), timeout=30) == 7000.0
    [polled] = actorrt.get(users[1].make.remote(8), timeout=30)  # owned by a node: polling fetches it once
    deadline = time.monotonic() + 10
    while not actorrt.wait([polled], timeout=0)[0]:
        assert time.monotonic() < deadline, "a polled ref another process owns never became ready"
        time.sleep(0.01)
    assert actorrt.get(polled, timeout=0).tolist() == [8] * 1000
    with pytest.raises(TypeError, match="put\\(\\) cannot serialize a lock"):
        actorrt.put(threading.Lock())


def test_get_many_and_type_errors(cluster):
    a = Counter.options(node=0).remote()
    assert actorrt.get([a.add.remote(1), a.add.remote(1)], timeout=30) == [1, 2]
    assert actorrt.get([], timeout=30) == []
    with pytest.raises(TypeError, match="element 0 is a str, not an ObjectRef"):
        actorrt.get(["not a ref"], timeout=1)
    with pytest.raises(TypeError, match="get\\(\\) takes an ObjectRef or a list of ObjectRefs, not int"):
        actorrt.get(5)
    with pytest.raises(TypeError, match="argument 'k' \\(a lock\\) cannot be pickled"):
        a.add.remote(k=threading.Lock())
    with pytest.raises(TypeError, match="argument 2 \\(a lock\\) cannot be pickled"):
        a.add_later.remote(1, threading.Lock())
    assert actorrt.get(a.add.remote(1), timeout=30) == 3  # nothing of the refused calls was sent


@actorrt.remote(node=1, checkpoint_every=5)
class Placed:
    def where(self):
        return os.getpid()


def test_remote_takes_actor_options_and_an_unknown_option_lists_the_real_ones(cluster):
    pids = {n["node"]: n["pid"] for n in actorrt.nodes()}
    assert actorrt.get(Placed.remote().where.remote(), timeout=30) == pids[1]
    assert actorrt.get(Placed.options(node=0).remote().where.remote(), timeout=30) == pids[0]
    with pytest.raises(TypeError, match="unknown actor option concurrency_groups: the options are checkpoint_every, "
                                        "ft, get_if_exists, lifetime, max_concurrency, max_in_flight, name, node, "
                                        "nondeterministic, standby \\(concurrency_groups is Ray's: here, one group"):
        Counter.options(concurrency_groups={"io": 2})
    with pytest.raises(TypeError, match="unknown actor option bogus: the options"):
        actorrt.remote(num_gpus=1, bogus=2)
    ray_annotated = Placed.options(num_cpus=2, max_restarts=-1, lifetime="detached")  # meant here, or ignored
    assert actorrt.get(ray_annotated.options(node=1).remote().where.remote(), timeout=30) == pids[1]
    with pytest.raises(TypeError, match="unknown remote-function option checkpoint_every"):
        actorrt.remote(checkpoint_every=3)(lambda: 1)


def test_numpy_arrays_cross_processes(cluster):
    a = Counter.options(node=1).remote()
    arr = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)
    total, dtype, shape = actorrt.get(a.sum_array.remote(arr), timeout=30)
    assert total == pytest.approx(float(arr.sum()), rel=1e-5)
    assert (dtype, shape) == (arr.dtype.str, arr.shape)
    np.testing.assert_array_equal(actorrt.get(a.double.remote(arr), timeout=30), arr * 2)


def test_driver_api_is_thread_safe(cluster):
    a = Counter.options(node=0).remote()
    b = Counter.options(node=1).remote()
    threads, per_thread, errors = 8, 50, []

    def work(who):
        try:
            refs = [a.add.remote(1) for _ in range(per_thread)]
            for i in range(per_thread):
                b.record.remote(who, i)
            actorrt.get(refs, timeout=60)
        except Exception as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert errors == []
    assert actorrt.get(a.add.remote(0), timeout=30) == threads * per_thread
    log = actorrt.get(b.get_log.remote(), timeout=30)
    for who in range(threads):
        assert [i for w, i in log if w == who] == list(range(per_thread))


def test_stats_and_nodes_are_plain_dicts(cluster):
    a = Counter.options(node=1).remote()
    actorrt.get(a.add.remote(1), timeout=30)
    nodes = actorrt.nodes()
    assert [n["node"] for n in nodes] == [0, 1]
    assert all(n["state"] == "ALIVE" and n["pid"] > 0 for n in nodes)
    stats = actorrt.stats()
    node1 = next(n for n in stats["nodes"] if n["node"] == 1)
    mine = [x for x in node1["actors"] if x["actor_id"] == a.actor_id.hex()]
    assert mine and mine[0]["executed"] == 2 and mine[0]["class"] == "Counter"
    assert node1["num_actors"] == len(node1["actors"])
    assert len(stats["store_shards"]) == 2
    assert stats["driver"]["pending_results"] == 0
    # node 1 answered our tasks over a stream: every write carried at least one message
    assert node1["batches_sent"] >= 1 and node1["messages_sent"] >= node1["batches_sent"]


@actorrt.remote
class Registrar:
    def create(self, name):
        return Counter.options(name=name).remote(100)  # named from inside an actor


def test_a_named_actor_is_found_by_name_from_any_driver(cluster, tmp_path):
    counter = Counter.options(name="the-counter", node=1).remote(5)
    same = actorrt.get_actor("the-counter")
    assert same == counter and actorrt.get(same.add.remote(1), timeout=30) == 6
    with pytest.raises(ValueError, match=r"an actor named 'the-counter' exists already \(a Counter\)"):
        Counter.options(name="the-counter").remote()
    with pytest.raises(ValueError, match="no actor is named 'nobody'"):
        actorrt.get_actor("nobody")

    made = actorrt.get(Registrar.remote().create.remote("made-inside"), timeout=30)
    deadline = time.monotonic() + 10
    while True:  # an actor takes the name in the background
        try:
            assert actorrt.get_actor("made-inside") == made
            break
        except ValueError:
            assert time.monotonic() < deadline
            time.sleep(0.1)

    session = context.current().head_process.session
    script = tmp_path / "other_driver.py"
    script.write_text("import sys, actorrt\n"
                      "actorrt.init(address=sys.argv[1])\n"
                      "print(actorrt.get(actorrt.get_actor('the-counter').add.remote(10), timeout=30))\n")
    out = subprocess.run([sys.executable, str(script), session.head_address], capture_output=True, text=True,
                         env=dict(os.environ, ACTORRT_TOKEN=session.token), timeout=120)
    assert out.stdout.split() == ["16"], out.stdout + out.stderr


def test_bad_arguments_to_public_functions_name_the_argument_and_what_is_allowed(cluster):
    a = Counter.options(node=0).remote()
    ref = a.add.remote(1)
    with pytest.raises(ValueError, match="timeout must be a number of seconds >= 0, or None, not '1'"):
        actorrt.get(ref, timeout="1")
    with pytest.raises(ValueError, match="timeout must be a number of seconds >= 0, or None, not -1"):
        actorrt.wait([ref], timeout=-1)
    with pytest.raises(TypeError, match="record\\(\\) takes a function to call and log"):
        actorrt.record(5)
    with pytest.raises(TypeError, match="kill_node\\(\\) takes a node slot number"):
        actorrt.kill_node("a")
    with pytest.raises(ValueError, match="no node 7; nodes are \\[0, 1\\]"):
        actorrt.kill_node(7)
    with pytest.raises(TypeError, match="get_actor\\(\\) takes the actor's name, a str, not int"):
        actorrt.get_actor(3)
    assert actorrt.checkpoint(a, timeout=60)["actors"]  # one handle is taken as well as a list
