"""What Ray's actor tests check, where it applies here: arguments of every kind, custom classes,
class and static attributes, actors made inside actors, handles passed around, constructor
errors, a class defined again, submission order, nested refs and timeouts. Each against a plain
Python computation of the same answer."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import sys
import time
from dataclasses import dataclass

import cloudpickle
import pytest

import actorrt
from tests.support.waiting import eventually

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # node processes cannot import this module


@dataclass
class Point:
    x: int
    y: int

    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)


@actorrt.remote
class Echo:
    greeting = "hello"  # a class attribute

    def __init__(self, *args, scale=1, **kwargs):
        self.args, self.scale, self.kwargs = args, scale, kwargs

    @staticmethod
    def double(x):
        return 2 * x

    @classmethod
    def kind(cls):
        return cls.__name__

    def call(self, a, b=2, *rest, c, d=4, **more):
        return (a, b, rest, c, d, more)

    def made_with(self):
        return self.args, self.scale, self.kwargs

    def greet(self, name):
        return f"{self.greeting} {name}"

    def move(self, p: Point, dx: int) -> Point:
        return Point(p.x + dx, p.y)

    def norm(self, p: Point) -> int:
        return p.norm1() * self.scale


@actorrt.remote
class Child:
    def __init__(self, value):
        self.value = value

    def get(self):
        return self.value


@actorrt.remote
class Parent:
    def __init__(self):
        self.children = [Child.remote(i) for i in range(3)]

    def children_handles(self):
        return self.children

    async def sum_children(self):
        return sum([await c.get.remote() for c in self.children])


@actorrt.remote
class Appender:
    def __init__(self):
        self.seen = []

    def add(self, x):
        self.seen.append(x)
        return len(self.seen)

    def items(self):
        return self.seen


@actorrt.remote
class User:
    async def use(self, appender, x):
        return await appender.add.remote(x)


@actorrt.remote
class Failing:
    def __init__(self, fail):
        if fail:
            raise ValueError("bad constructor argument")

    def ok(self):
        return "ok"


@actorrt.remote
def plus(a, b=0):
    return a + b


@actorrt.remote
class Slow:
    def sleep(self, s):
        time.sleep(s)
        return s


def test_keyword_and_variable_arguments_reach_the_method_as_in_python(cluster):
    echo = Echo.remote(1, 2, scale=3, tag="t")
    assert actorrt.get(echo.made_with.remote(), timeout=30) == ((1, 2), 3, {"tag": "t"})

    def call(a, b=2, *rest, c, d=4, **more):
        return (a, b, rest, c, d, more)

    assert actorrt.get(echo.call.remote(1, c=3), timeout=30) == call(1, c=3)
    assert actorrt.get(echo.call.remote(1, 5, 6, 7, c=3, d=9, e=10), timeout=30) == call(1, 5, 6, 7, c=3, d=9, e=10)
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'c'"):
        actorrt.get(echo.call.remote(1), timeout=30)


def test_custom_classes_cross_both_ways_and_class_and_static_attributes_work(cluster):
    echo = Echo.remote(scale=2)
    assert actorrt.get(echo.move.remote(Point(1, 2), 5), timeout=30) == Point(6, 2)
    assert actorrt.get(echo.norm.remote(Point(-3, 4)), timeout=30) == Point(-3, 4).norm1() * 2
    assert actorrt.get(echo.greet.remote("ray"), timeout=30) == "hello ray"
    assert actorrt.get(echo.double.remote(21), timeout=30) == 42
    assert actorrt.get(echo.kind.remote(), timeout=30) == "Echo"


def test_actors_made_inside_actors_and_handles_passed_around(cluster):
    parent = Parent.remote()
    assert actorrt.get(parent.sum_children.remote(), timeout=30) == 0 + 1 + 2
    children = actorrt.get(parent.children_handles.remote(), timeout=30)  # handles returned to the driver
    assert actorrt.get([c.get.remote() for c in children], timeout=30) == [0, 1, 2]
    appender = Appender.remote()
    users = [User.remote() for _ in range(3)]
    assert sorted(actorrt.get([u.use.remote(appender, i) for i, u in enumerate(users)], timeout=30)) == [1, 2, 3]
    assert sorted(actorrt.get(appender.items.remote(), timeout=30)) == [0, 1, 2]


def test_arguments_that_do_not_fit_the_constructor_or_the_function_raise_at_the_call(cluster):
    with pytest.raises(TypeError, match="Failing.remote\\(\\): missing a required argument: 'fail'"):
        Failing.remote()
    with pytest.raises(TypeError, match="Failing.remote\\(\\): got an unexpected keyword argument 'fial'"):
        Failing.remote(True, fial=True)
    with pytest.raises(TypeError, match="plus.remote\\(\\): too many positional arguments"):
        plus.remote(1, 2, 3)
    assert actorrt.get(plus.remote(1, b=2), timeout=30) == 3


def test_a_ref_as_an_asyncio_future_and_as_a_concurrent_future(cluster):
    slow = Slow.remote()

    async def first_done():
        never = asyncio.ensure_future(asyncio.sleep(30))
        done, pending = await asyncio.wait([slow.sleep.remote(0.05).as_future(), never],
                                           return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        return [task.result() for task in done]

    assert asyncio.run(first_done()) == [0.05]
    futures = [slow.sleep.remote(s).future() for s in (0.02, 0.01)]
    assert sorted(f.result(timeout=30) for f in concurrent.futures.as_completed(futures, timeout=30)) == [0.01, 0.02]


def test_a_constructor_error_kills_the_actor_and_says_why(cluster):
    failing = Failing.remote(True)
    with pytest.raises(actorrt.ActorDiedError, match="ValueError: bad constructor argument"):
        actorrt.get(failing.ok.remote(), timeout=30)
    assert actorrt.get(Failing.remote(False).ok.remote(), timeout=30) == "ok"


def test_a_class_defined_again_makes_actors_of_the_new_definition(cluster):
    @actorrt.remote
    class Versioned:
        def version(self):
            return 1

    first = Versioned.remote()

    @actorrt.remote
    class Versioned:  # noqa: F811 - defined again on purpose, as in a notebook
        def version(self):
            return 2

    assert actorrt.get([first.version.remote(), Versioned.remote().version.remote()], timeout=30) == [1, 2]


def test_tasks_from_one_submitter_run_in_submission_order(cluster):
    appender = Appender.remote()
    refs = [appender.add.remote(i) for i in range(200)]
    assert actorrt.get(refs, timeout=60) == list(range(1, 201))
    assert actorrt.get(appender.items.remote(), timeout=30) == list(range(200))


def test_refs_nested_in_arguments_are_passed_as_refs_and_top_level_ones_resolved(cluster):
    appender = Appender.remote()
    one = appender.add.remote("x")
    nested = actorrt.get(appender.add.remote([one]), timeout=30)  # a list holding a ref: not resolved
    assert nested == 2
    [inner] = actorrt.get(appender.items.remote(), timeout=30)[1]
    assert isinstance(inner, actorrt.ObjectRef) and actorrt.get(inner, timeout=30) == 1
    assert actorrt.get(appender.add.remote(one), timeout=30) == 3  # top level: resolved before the task
    assert actorrt.get(appender.items.remote(), timeout=30)[2] == 1


def test_timeouts_raise_and_the_actor_serves_on(cluster):
    slow = Slow.remote()
    with pytest.raises(actorrt.GetTimeoutError):
        actorrt.get(slow.sleep.remote(1.0), timeout=0.1)
    assert actorrt.get(slow.sleep.remote(0), timeout=30) == 0  # behind the one that timed out


@actorrt.remote
def doubled(x):
    return 2 * x


@actorrt.remote
def doubled_twice(x):
    return actorrt.get(doubled.remote(actorrt.get(doubled.remote(x))))  # a blocking get in a function


def _read(store, key):
    return actorrt.get(store.read.remote(key))  # reached through a helper of the module


@actorrt.remote
class KeyStore:
    def __init__(self):
        self.items = {}

    def put(self, key, value):
        self.items[key] = value
        return len(self.items)

    def read(self, key):
        return self.items.get(key)


@actorrt.remote
class Client:
    def __init__(self, store, first):
        self.store = store
        self.size = actorrt.get(store.put.remote("first", first))  # a blocking get in a constructor
        self.seen = []

    def put_and_read(self, key, value):
        size = actorrt.get(self.store.put.remote(key, value))  # Ray's pattern: get in a plain method
        self.seen.append((key, _read(self.store, key), size))
        return size

    def gather(self, keys):
        ready, _ = actorrt.wait([self.store.read.remote(k) for k in keys], num_returns=len(keys), timeout=30)
        return sorted(actorrt.get(ready))

    def seen_so_far(self):
        return self.seen


def test_a_plain_method_a_constructor_and_a_function_block_in_get_while_the_node_serves_on(cluster):
    store = KeyStore.options(node=0).remote()
    client = Client.options(node=0).remote(store, 10)  # beside its store: the node serves both
    sizes = [actorrt.get(client.put_and_read.remote(f"k{i}", i), timeout=30) for i in range(5)]
    assert sizes == [2, 3, 4, 5, 6]
    assert actorrt.get(client.seen_so_far.remote(), timeout=30) == [(f"k{i}", i, i + 2) for i in range(5)]
    assert actorrt.get(client.gather.remote(["k1", "k3"]), timeout=30) == [1, 3]
    assert actorrt.get(doubled_twice.remote(5), timeout=30) == 20


@actorrt.remote
class Cyclic:
    def __init__(self):
        self.other = None

    def pair(self, other):
        self.other = other

    def ask(self):
        return actorrt.get(self.other.ask_back.remote())

    def ask_back(self):
        return actorrt.get(self.other.ask.remote())


def test_two_methods_blocked_in_get_on_each_other_end_in_a_deadlock_error(cluster):
    a, b = Cyclic.remote(), Cyclic.remote()
    actorrt.get([a.pair.remote(b), b.pair.remote(a)], timeout=30)
    with pytest.raises(actorrt.DeadlockError, match="a cycle of awaits"):
        actorrt.get(a.ask.remote(), timeout=60)
    assert actorrt.get(a.pair.remote(b), timeout=30) is None  # both serve on


def _dead(actor_id: bytes) -> bool | None:
    """Whether the actor is dead, as its node says (None: no node hosts it)."""
    found = [a for n in actorrt.stats()["nodes"] for a in n["actors"] if a["actor_id"] == actor_id.hex()]
    return found[0]["dead"] if found else None


def test_an_actor_whose_handles_are_all_gone_is_released_after_its_queued_calls(cluster):
    slow = Slow.remote()
    queued = slow.sleep.remote(0.3)
    released = slow.actor_id
    del slow
    gc.collect()
    assert actorrt.get(queued, timeout=30) == 0.3  # what was queued still ran
    eventually(lambda: _dead(released), what="the released actor's death")
    passed, detached, named = Appender.remote(), Appender.options(lifetime="detached").remote(), \
        Appender.options(name="kept-by-its-name").remote()
    kept = [passed.actor_id, detached.actor_id, named.actor_id]
    user = User.remote()
    assert actorrt.get(user.use.remote(passed, 1), timeout=30) == 1  # a copy of the handle went to an actor
    actorrt.get([detached.add.remote(1), named.add.remote(1)], timeout=30)
    del passed, detached, named
    gc.collect()
    time.sleep(0.5)
    assert [_dead(a) for a in kept] == [False] * 3
    actorrt.kill(actorrt.get_actor("kept-by-its-name"))  # (frees the name for other tests)
