"""Cycles of awaits between actors (each runs one task at a time) end in a DeadlockError that
names the cycle, instead of a hang; the actors go on serving, and a replay repeats the outcome."""

from __future__ import annotations

import asyncio
import sys
import time

import cloudpickle
import pytest

import actorrt
from actorrt.lineage import ids

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@actorrt.remote
class Peer:
    def __init__(self):
        self.peer = None
        self.seen = []

    def meet(self, peer):
        self.peer = peer

    async def ping(self):
        """Awaits the peer, whose relay awaits this actor: a cycle."""
        try:
            return await self.peer.relay.remote()
        except actorrt.DeadlockError as exc:
            self.seen.append(type(exc).__name__)
            raise

    async def relay(self):
        return await self.peer.pong.remote()

    def pong(self):
        return "pong"

    async def ask_self(self, me):
        return await me.pong.remote()  # queued behind this very task

    async def wait_for_peer(self):
        await asyncio.sleep(1.0)  # by then the peer is stuck on an argument this actor makes
        return await self.peer.pong.remote()

    def use(self, value):
        return value

    def slowly(self, value):
        time.sleep(0.5)
        return value

    def history(self):
        return self.seen


def pair(nodes=(0, 1)):
    a, b = Peer.options(node=nodes[0]).remote(), Peer.options(node=nodes[1]).remote()
    actorrt.get([a.meet.remote(b), b.meet.remote(a)], timeout=30)
    return a, b


def test_two_actors_awaiting_each_other_get_an_error_naming_the_cycle(cluster):
    a, b = pair()
    started = time.monotonic()
    with pytest.raises(actorrt.DeadlockError, match="a cycle of awaits: ") as caught:
        actorrt.get(a.ping.remote(), timeout=30)
    assert time.monotonic() - started < 10
    # ping's await fails itself, or first gets relay's failure (whichever node hears the head first).
    assert actorrt.get(a.history.remote(), timeout=30) in (["DeadlockError"], ["TaskError(DeadlockError)"])
    a_id, b_id = (ids.short(h.actor_id) for h in (a, b))
    for step in (f"Peer({a_id}).ping awaits a result of Peer({b_id}), which is running Peer({b_id}).relay",
                 f"Peer({b_id}).relay awaits a result of Peer({a_id}), which is running Peer({a_id}).ping"):
        assert step in str(caught.value)
    # Both go on serving: the pong queued behind the cycle ran too.
    assert actorrt.get([a.pong.remote(), b.pong.remote()], timeout=30) == ["pong", "pong"]


def test_an_actor_awaiting_its_own_queued_task_gets_the_error_too(cluster):
    a = Peer.options(node=1).remote()
    with pytest.raises(actorrt.DeadlockError, match=r"Peer\(\w+\)\.ask_self awaits a result of Peer\(\w+\), which "
                                                    r"is running Peer\(\w+\)\.ask_self"):
        actorrt.get(a.ask_self.remote(a), timeout=30)
    assert actorrt.get(a.pong.remote(), timeout=30) == "pong"


def test_a_task_whose_argument_waits_behind_a_cycle_fails_instead_of_hanging(cluster):
    a, b = pair()
    waiting = a.wait_for_peer.remote()  # in 1 s it awaits b, which by then is stuck on:
    blocked = b.use.remote(a.pong.remote())  # an argument made by a's task queued behind waiting
    with pytest.raises(actorrt.DeadlockError, match="wait_for_peer awaits a result of"):
        actorrt.get(waiting, timeout=30)
    with pytest.raises(actorrt.DeadlockError, match="Peer\\(\\w+\\)\\.use awaits a result of"):
        actorrt.get(blocked, timeout=30)
    assert actorrt.get(b.use.remote(5), timeout=30) == 5


@actorrt.remote
class Busy:
    async def hand_over(self, x):
        made = x.slowly.remote(5)
        used = x.use.remote(made)  # x awaits its own earlier task's value, owned by this node
        await asyncio.sleep(0.3)  # both sent
        time.sleep(3.0)  # this node's loop stops: the value x awaits comes here and waits
        return [used]


def test_a_late_value_of_a_task_that_ran_is_no_deadlock(cluster):
    """x awaits a value its own earlier task made (an await of itself, as a cycle of one would be),
    and its owner is stuck for 3 s: the task ran, so the await is only slow."""
    x = Peer.options(node=1).remote()
    [used] = actorrt.get(Busy.options(node=0).remote().hand_over.remote(x), timeout=30)
    assert actorrt.get(used, timeout=30) == 5


def test_slow_awaits_are_not_deadlocks(cluster):
    a, b = pair()

    @actorrt.remote
    def slow(seconds):
        time.sleep(seconds)
        return seconds

    @actorrt.remote
    class Waiter:
        async def wait(self, ref_holder):
            return await ref_holder[0]

    w = Waiter.options(node=0).remote()
    assert actorrt.get(w.wait.remote([slow.options(node=1).remote(2.5)]), timeout=30) == 2.5


def test_a_replay_raises_the_deadlock_again_at_the_same_await(cluster):
    """The outcome is in the task's log: where ping's own await failed (DeadlockError), the replayed
    ping raises it again, instead of receiving the relay's failure (a TaskError) and storing
    another history. (Where the relay's failure came first, the replay receives it again.)"""
    a, b = pair()
    with pytest.raises(actorrt.DeadlockError):
        actorrt.get(a.ping.remote(), timeout=30)
    before = actorrt.get(a.history.remote(), timeout=30)
    assert before in (["DeadlockError"], ["TaskError(DeadlockError)"])
    actorrt.kill_node(0)  # a's node: a is rebuilt by replaying its tasks
    assert actorrt.get(a.history.remote(), timeout=60) == before
    assert actorrt.get(a.pong.remote(), timeout=30) == "pong"
