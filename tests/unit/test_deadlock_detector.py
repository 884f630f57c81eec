"""The head's search for cycles of awaits, on reports made by hand (no sockets)."""

from __future__ import annotations

from actorrt.cluster.deadlocks import DEADLOCK_AFTER_S, DeadlockDetector
from actorrt.rpc import head_pb2


def edge(waiter: bytes, producer: bytes, waited: float, obj: bytes = b"o") -> head_pb2.Await:
    return head_pb2.Await(waiter=waiter, task_id=b"t" + waiter, object_id=obj + waiter, producer=producer,
                          waited_s=waited, waiter_name=f"A({waiter.decode()}).m")


def test_a_cycle_is_found_once_its_awaits_lasted_and_named_from_its_smallest_actor():
    d = DeadlockDetector()
    d.observe(0, [edge(b"x", b"y", 0.5)], False, now=100.0)
    d.observe(1, [edge(b"y", b"x", 0.5)], False, now=100.0)
    assert d.check(100.1) == []  # not long enough
    d.observe(0, [edge(b"x", b"y", 1.6)], False, now=101.1)
    d.observe(1, [edge(b"y", b"x", 1.6)], False, now=101.1)
    [found] = d.check(101.2)
    assert [a.waiter for a in found.cycle] == [b"x", b"y"]
    assert found.message.startswith("a cycle of awaits: A(x).m awaits a result of A(y), which is running A(y).m; "
                                    "A(y).m awaits a result of A(x), which is running A(x).m.")
    assert d.check(101.3) == []  # announced once


def test_no_cycle_no_deadlock_and_self_awaits_are_cycles():
    d = DeadlockDetector()
    d.observe(0, [edge(b"x", b"y", 5), edge(b"y", b"z", 5), edge(b"s", b"s", 5)], False, now=10.0)
    [found] = d.check(10.0)
    assert [a.waiter for a in found.cycle] == [b"s"]
    d.observe(0, [edge(b"x", b"y", 5), edge(b"y", b"z", 5), edge(b"z", b"x", 5)], False, now=11.0)
    [found] = d.check(11.0)
    assert [a.producer for a in found.cycle] == [b"y", b"z", b"x"]


def test_no_deadlock_is_declared_while_a_node_recovers_or_from_stale_reports():
    d = DeadlockDetector()
    d.observe(0, [edge(b"x", b"y", 5)], True, now=10.0)  # node 0 is recovering
    d.observe(1, [edge(b"y", b"x", 5)], False, now=10.0)
    assert d.check(10.0) == []
    # Calm since 10.0: the awaits count from then, and must last DEADLOCK_AFTER_S.
    d.observe(0, [edge(b"x", b"y", 5.5)], False, now=10.5)
    d.observe(1, [edge(b"y", b"x", 5.5)], False, now=10.5)
    assert d.check(10.5) == []
    later = 10.0 + DEADLOCK_AFTER_S + 0.1
    d.observe(0, [edge(b"x", b"y", 6.2)], False, now=later)
    assert d.check(later) == []  # node 1's report is stale: it may have moved on
    d.observe(1, [edge(b"y", b"x", 6.2)], False, now=later)
    assert len(d.check(later)) == 1
