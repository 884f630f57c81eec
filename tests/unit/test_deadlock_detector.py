"""The head's search for cycles of awaits, on reports made by hand (no sockets)."""

from __future__ import annotations

from actorrt.cluster.deadlocks import CONFIRM_WITHIN_S, DeadlockDetector
from actorrt.rpc import head_pb2


def edge(waiter: bytes, producer: bytes, waited: float) -> head_pb2.Await:
    return head_pb2.Await(waiter=waiter, task_id=b"t" + waiter, object_id=b"o" + producer + waiter, producer=producer,
                          waited_s=waited, waiter_name=f"A({waiter.decode()}).m")


def test_a_cycle_is_suspected_once_its_awaits_lasted_and_declared_once_its_producers_confirm():
    d = DeadlockDetector()
    xy, yx = edge(b"x", b"y", 0.5), edge(b"y", b"x", 0.5)
    d.observe(0, [xy], [], now=100.0)
    d.observe(1, [yx], [], now=100.0)
    assert d.check(100.1) == []  # not long enough
    xy.waited_s = yx.waited_s = 1.6
    d.observe(0, [xy], [], now=101.1)
    d.observe(1, [yx], [], now=101.1)
    [asked] = d.check(101.2)
    assert asked.suspected and [a.waiter for a in asked.cycle] == [b"x", b"y"]
    assert d.check(101.3) == []  # asked already: waiting for the answers
    d.observe(1, [yx], [xy.object_id], now=101.4)  # y's node: the task x awaits is yet to end there
    assert d.check(101.45) == []
    d.observe(0, [xy], [yx.object_id], now=101.5)
    [found] = d.check(101.6)
    assert not found.suspected
    assert found.message.startswith("a cycle of awaits: A(x).m awaits a result of A(y), which is running A(y).m; "
                                    "A(y).m awaits a result of A(x), which is running A(x).m.")
    assert d.check(101.7) == []  # announced once


def test_an_await_of_a_task_that_ended_is_no_deadlock_however_long_it_lasts():
    d = DeadlockDetector()
    xx = edge(b"x", b"x", 5)  # x awaits a value of its own: made by a task that ran, or one queued?
    d.observe(0, [xx], [], now=10.0)
    [asked] = d.check(10.0)
    assert asked.suspected
    d.observe(0, [xx], [], now=10.2)  # no confirmation: it ran, and its value is on its way
    assert d.check(10.2) == []
    later = 10.0 + CONFIRM_WITHIN_S + 0.1
    d.observe(0, [xx], [], now=later)
    [again] = d.check(later)  # asked again, still no deadlock
    assert again.suspected


def test_paths_are_not_cycles_and_stale_reports_are_not_used():
    d = DeadlockDetector()
    d.observe(0, [edge(b"x", b"y", 5), edge(b"y", b"z", 5)], [], now=10.0)
    assert d.check(10.0) == []
    d.observe(0, [edge(b"x", b"y", 5), edge(b"y", b"z", 5)], [], now=11.0)
    d.observe(1, [edge(b"z", b"x", 5)], [], now=10.0)  # a second old: it may have moved on
    assert d.check(11.0) == []
    d.observe(1, [edge(b"z", b"x", 6)], [], now=11.0)
    [asked] = d.check(11.0)
    assert [a.producer for a in asked.cycle] == [b"y", b"z", b"x"]
