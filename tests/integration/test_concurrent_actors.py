"""Async actors with ``max_concurrency``: calls interleave at their awaits, and a replay after a
kill goes through the recorded steps in the recorded order (the state it rebuilds is the one
lost, compared exactly); re-entrant calls work while a slot is free; a replay that diverges
stops loudly."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import cloudpickle
import pytest

import actorrt

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # node processes cannot import this module


@actorrt.remote
class Gate:
    def __init__(self):
        self.opened = asyncio.Event()

    async def wait(self, i):
        await self.opened.wait()  # three of these and one open(): only concurrent calls get past
        return i

    async def open(self):
        self.opened.set()

    async def call_me(self, me, depth):
        return depth if depth == 0 else await me.call_me.remote(me, depth - 1)  # calls to itself

    async def via(self, other, me):
        return await other.back.remote(me)  # A -> B -> A


@actorrt.remote
class Back:
    async def back(self, gate):
        return await gate.wait.remote("back")


def test_concurrent_calls_wait_on_each_other_and_call_back_into_the_actor(cluster):
    gate = Gate.options(max_concurrency=4).remote()
    waiting = [gate.wait.remote(i) for i in range(3)]
    gate.open.remote()
    assert actorrt.get(waiting, timeout=30) == [0, 1, 2]
    assert actorrt.get(gate.call_me.remote(gate, 2), timeout=30) == 0
    assert actorrt.get(gate.via.remote(Back.remote(), gate), timeout=30) == "back"
    with pytest.raises(ValueError, match="max_concurrency must be an int >= 1"):
        Gate.options(max_concurrency=0)


@actorrt.remote
class Journal:
    """Its entries depend on the order of its calls' steps: each records how long the journal was."""

    def __init__(self):
        self.entries = []

    async def write(self, i):
        for k in range(3):
            self.entries.append((i, k, len(self.entries)))
            await asyncio.sleep(0.001 * ((i * 7 + k) % 4))
        return len(self.entries)

    def read(self):
        return list(self.entries)


def test_interleaved_calls_replayed_after_a_kill_rebuild_exactly_the_lost_state(cluster):
    journal = Journal.options(node=1, max_concurrency=4, checkpoint_every=15).remote()
    actorrt.get([journal.write.remote(i) for i in range(40)], timeout=60)
    before = actorrt.get(journal.read.remote(), timeout=60)
    assert sorted(e[:2] for e in before) == [(i, k) for i in range(40) for k in range(3)]
    assert [e[0] for e in before] != sorted(e[0] for e in before)  # the calls did interleave
    actorrt.kill_node(1)
    assert actorrt.get(journal.read.remote(), timeout=60) == before  # the same steps, in the same order
    more = [journal.write.remote(i) for i in range(40, 60)]
    actorrt.kill_node(1)  # while calls run
    actorrt.get(more, timeout=60)
    after = actorrt.get(journal.read.remote(), timeout=60)
    assert after[:len(before)] == before
    assert sorted(e[:2] for e in after) == [(i, k) for i in range(60) for k in range(3)]  # each step once


@actorrt.remote
class ParameterServer:
    """Pushes read the weights, await, then write: concurrent pushes lose updates, as a real
    asynchronous parameter server does; which ones depends on the interleaving."""

    def __init__(self):
        self.weights = 0.0
        self.applied = []

    async def push(self, worker, step, gradient):
        seen = self.weights
        await asyncio.sleep(0.0005 * (step % 3))
        self.weights = seen + gradient
        self.applied.append((worker, step))
        return self.weights

    async def pull(self):
        await asyncio.sleep(0)
        return self.weights

    def state(self):
        return self.weights, list(self.applied)


@actorrt.remote
class Trainer:
    def __init__(self, server, worker):
        self.server, self.worker = server, worker

    async def train(self, steps):
        for step in range(steps):
            weights = await self.server.pull.remote()
            await self.server.push.remote(self.worker, step, 1.0 + 0.001 * weights)
        return steps


def test_a_parameter_server_with_four_workers_pushing_and_pulling_survives_a_kill(cluster):
    server = ParameterServer.options(node=1, max_concurrency=8, checkpoint_every=20).remote()
    trainers = [Trainer.options(node=0).remote(server, w) for w in range(4)]
    first = [t.train.remote(15) for t in trainers]
    assert actorrt.get(first, timeout=60) == [15] * 4
    weights, applied = actorrt.get(server.state.remote(), timeout=60)
    actorrt.kill_node(1)
    assert actorrt.get(server.state.remote(), timeout=60) == (weights, applied)  # replayed exactly
    second = [t.train.remote(15) for t in trainers]
    actorrt.kill_node(1)  # in the middle of the pushes
    assert actorrt.get(second, timeout=90) == [15] * 4
    _, applied = actorrt.get(server.state.remote(), timeout=60)
    assert sorted(applied) == sorted([(w, s) for w in range(4) for s in range(15)] * 2)  # each push once


@actorrt.remote
class Moody:
    """Reads a file between two awaits without recording it: a replay may take other steps."""

    def __init__(self, path):
        self.path, self.steps = path, 0

    async def work(self):
        for _ in range(int(Path(self.path).read_text())):
            self.steps += 1
            await asyncio.sleep(0.001)
        return self.steps

    def count(self):
        return self.steps


def test_a_replay_that_diverges_stops_the_actor_loudly(cluster, tmp_path):
    mood = tmp_path / "mood"
    mood.write_text("3")
    moody = Moody.options(node=1, max_concurrency=2).remote(str(mood))
    actorrt.get([moody.work.remote() for _ in range(2)], timeout=60)
    assert actorrt.get(moody.count.remote(), timeout=60) == 6
    mood.write_text("1")  # what it read before the failure is not what its replay reads
    actorrt.kill_node(1)
    with pytest.raises(actorrt.ActorDiedError, match="did not record"):
        actorrt.get(moody.count.remote(), timeout=60)
