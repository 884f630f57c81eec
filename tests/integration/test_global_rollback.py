"""The global-rollback baseline (``ft="checkpoint"``): a global checkpoint is consistent, so a
rollback to it loses no call and applies none twice. Real node processes, SIGKILL."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import numpy as np
import pytest

import actorrt
from actorrt.lineage.checkpoints import read_checkpoint
from tests.support.waiting import eventually


@actorrt.remote
class Counter:
    def __init__(self):
        self.n = 0

    async def busy(self, seconds):
        await asyncio.sleep(seconds)  # holds the mailbox, not the node's loop

    def add(self, k):
        self.n += k
        return self.n

    def value(self):
        return self.n


@actorrt.remote
class Sender:
    def __init__(self):
        self.sent = 0

    async def send_after(self, counter, seconds):
        await asyncio.sleep(seconds)
        await counter.add.remote(1)
        self.sent += 1

    def value(self):
        return self.sent


def test_a_call_answered_between_its_receivers_checkpoint_and_its_senders_is_not_lost(cluster_with, tmp_path):
    """The receiver checkpoints first, then runs the call and answers it, then the sender
    checkpoints: the call is in flight across the global checkpoint (Chandy-Lamport's channel
    state). The rollback must run it again at the receiver, though its sender heard back."""
    with cluster_with(num_nodes=2, store_shards=1, ft="checkpoint", checkpoint_dir=str(tmp_path / "ckpt")):
        counter = Counter.options(node=1).remote()
        sender = Sender.options(node=0).remote()
        actorrt.get([counter.value.remote(), sender.value.remote()])
        counter.busy.remote(0.6)  # the counter's barrier waits behind this; the add comes after it
        sender.send_after.remote(counter, 0.2)  # the sender's barrier waits behind this (and its answer)
        actorrt.checkpoint([counter, sender], timeout=30)
        assert actorrt.get([counter.value.remote(), sender.value.remote()]) == [1, 1]
        actorrt.kill_node(0)
        eventually(actorrt.rollbacks, what="the rollback")
        # The restored sender sends the add again as it starts; the counter runs it once.
        eventually(lambda: _values(counter, sender), lambda v: v == [1, 1], timeout=10, what="the add sent again")
        time.sleep(0.5)
        assert _values(counter, sender) == [1, 1]
        # Once a checkpoint of the counter covers the add, the sender keeps it no more.
        actorrt.checkpoint([counter], timeout=30)
        eventually(lambda: _pending(sender), lambda pending: pending == [], timeout=10,
                   what="the sender to let the add go")


def _pending(actor):
    """The calls ``actor``'s checkpoint, taken now, holds to send again after a rollback."""
    [entry] = actorrt.checkpoint([actor], timeout=30)["actors"].values()
    return [spec.method for spec in (p.spec for p in read_checkpoint(entry["path"]).pending)]


def _values(*actors):
    try:
        return actorrt.get([a.value.remote() for a in actors], timeout=10)
    except actorrt.RolledBackError:
        return None


@actorrt.remote
class Forward:
    """Adds what it is sent and sends it on; its answers only say that a call ran."""

    __actorrt_acks__ = ("add",)

    def __init__(self, to=None):
        self.to, self.n = to, 0

    async def add(self, k):
        self.n += k
        if self.to is not None:
            await self.to.add.remote(k)  # an acknowledgement: this actor depends on nothing in it

    def value(self):
        return self.n


def _epochs():
    return {n["node"]: n["epoch"] for n in actorrt.nodes()}


def _chain():
    """source (node 0) -> middle (node 1) -> sink (node 2)."""
    sink = Forward.options(node=2).remote()
    middle = Forward.options(node=1).remote(sink)
    source = Forward.options(node=0).remote(middle)
    return source, middle, sink


def test_a_failure_takes_back_only_the_nodes_the_frontier_names(cluster_with, tmp_path):
    """The middle's node fails after the checkpoint: the sink took its output since, so the sink's
    node goes back with it; the source's keeps running and sends its calls since the checkpoint
    again. Nobody sees a rollback, and every sum is exact."""
    with cluster_with(num_nodes=3, store_shards=1, ft="checkpoint", checkpoint_dir=str(tmp_path / "ckpt")):
        source, middle, sink = _chain()
        actorrt.get([source.add.remote(k) for k in range(1, 21)])
        actorrt.checkpoint([source, middle, sink], timeout=30)
        actorrt.get([source.add.remote(k) for k in range(21, 41)])
        before = _epochs()
        actorrt.kill_node(1)
        eventually(_epochs, lambda e: e[1] > before[1] and e[2] > before[2], timeout=30, what="nodes 1 and 2 back")
        assert _epochs()[0] == before[0] and actorrt.rollbacks() == 0
        expected = sum(range(1, 41))
        eventually(lambda: actorrt.get([a.value.remote() for a in (source, middle, sink)], timeout=10),
                   lambda v: v == [expected] * 3, timeout=20, what="the source's calls sent again")
        actorrt.get([source.add.remote(k) for k in range(41, 51)])
        expected = sum(range(1, 51))
        eventually(lambda: actorrt.get([a.value.remote() for a in (source, middle, sink)], timeout=10),
                   lambda v: v == [expected] * 3, timeout=20, what="the last calls")


@pytest.mark.parametrize("kills", [[2], [1, 2], [1, "recovering", 2]],
                         ids=["the sink's node", "two nodes at once", "one during the other's recovery"])
def test_what_the_frontier_takes_back_ends_exact_and_the_source_runs_on(cluster_with, tmp_path, kills):
    with cluster_with(num_nodes=3, store_shards=1, ft="checkpoint", checkpoint_dir=str(tmp_path / "ckpt")):
        source, middle, sink = _chain()
        actorrt.get([source.add.remote(k) for k in range(1, 11)])
        actorrt.checkpoint([source, middle, sink], timeout=30)
        calls = [source.add.remote(k) for k in range(11, 31)]  # some in flight through the kills
        before = _epochs()
        for kill in kills:
            if kill == "recovering":
                eventually(_epochs, lambda e: e[1] > before[1], timeout=30, what="node 1 restarting")
            else:
                os.kill(next(n["pid"] for n in actorrt.nodes() if n["node"] == kill), signal.SIGKILL)
        actorrt.get(calls, timeout=60)
        expected = sum(range(1, 31))
        eventually(lambda: actorrt.get([a.value.remote() for a in (source, middle, sink)], timeout=10),
                   lambda v: v == [expected] * 3, timeout=30, what="every sum")
        assert _epochs()[0] == before[0] and actorrt.rollbacks() == 0


@pytest.mark.parametrize("ft,asks", [("checkpoint", True), ("global_rollback", False)],
                         ids=["a driver took an answer that goes back", "ft=global_rollback"])
def test_every_node_goes_back_when_a_driver_took_an_answer_that_goes_back_or_when_asked(cluster_with, tmp_path,
                                                                                       ft, asks):
    with cluster_with(num_nodes=3, store_shards=1, ft=ft, checkpoint_dir=str(tmp_path / "ckpt")):
        source, middle, sink = _chain()
        actorrt.get([source.add.remote(k) for k in range(1, 11)])
        actorrt.checkpoint([source, middle, sink], timeout=30)
        actorrt.get(source.add.remote(100))
        if asks:
            assert actorrt.get(middle.value.remote()) == 155  # the driver took it: it cannot go back
        before = _epochs()
        actorrt.kill_node(1)
        eventually(actorrt.rollbacks, lambda n: n == 1, timeout=30, what="a global rollback")
        eventually(_epochs, lambda e: all(e[s] > before[s] for s in e), timeout=30, what="every node back")
        eventually(lambda: _values(source, middle, sink), lambda v: v == [55] * 3, timeout=20,
                   what="every actor at the checkpoint")


class LinearShard:
    """One shard of a linear regression; each call is one iteration's gradient at the weights
    the driver sends, and counts the iterations this worker ran."""

    def __init__(self, rank, workers):
        rng = np.random.default_rng(7)
        x, truth = rng.standard_normal((400, 8)), rng.standard_normal(8)
        rows = np.array_split(np.arange(400), workers)[rank]
        self.x, self.y, self.iterations = x[rows], (x @ truth)[rows], 0

    def gradient(self, weights):
        self.iterations += 1
        return self.x.T @ (self.x @ weights - self.y) / len(self.y)

    def ran(self):
        return self.iterations


GradientWorker = actorrt.remote(LinearShard)


def _train(gradients, iterations, lr=0.1, before=lambda i: None):
    """Gradient descent; ``gradients(weights)`` gives every shard's, summed here in rank order."""
    weights = np.zeros(8)
    for i in range(iterations):
        before(i)
        weights = weights - lr * sum(gradients(weights))
    return weights


def test_a_failure_costs_only_the_lost_workers_iterations_since_their_checkpoint(cluster_with, tmp_path):
    """Selective rollback: deterministic workers, each fed by the driver alone, are done again
    from their checkpoint with the calls the driver sends again, and give the same gradients. The
    driver goes on without a rollback, the other node keeps its workers' iterations, and the
    weights are bit-identical to plain numpy's in this process."""
    with cluster_with(num_nodes=2, store_shards=1, ft="checkpoint", checkpoint_dir=str(tmp_path / "ckpt")):
        workers = [GradientWorker.options(node=r % 2, nondeterministic=False).remote(r, 4) for r in range(4)]
        start = _epochs()

        iteration = [0]

        def before(i):
            iteration[0] = i
            if i == 10:
                actorrt.checkpoint(workers, timeout=30)

        def gradients(weights):
            refs = [w.gradient.remote(weights) for w in workers]
            if iteration[0] == 20:
                actorrt.kill_node(1)  # with the iteration's calls in flight
            return actorrt.get(refs, timeout=60)

        weights = _train(gradients, 30, before=before)
        assert actorrt.rollbacks() == 0 and _epochs()[0] == start[0] and _epochs()[1] > start[1]
        assert actorrt.get([w.ran.remote() for w in workers]) == [30] * 4  # the restored ones redid 11..21
    shards = [LinearShard(r, 4) for r in range(4)]
    assert np.array_equal(weights, _train(lambda w: [s.gradient(w) for s in shards], 30))


@pytest.mark.parametrize("second_sender", [False, True], ids=["one sender: done again", "two: every node back"])
def test_a_deterministic_actor_is_done_again_only_if_one_sender_fed_it_since_its_checkpoint(cluster_with, tmp_path,
                                                                                            second_sender):
    with cluster_with(num_nodes=2, store_shards=1, ft="checkpoint", checkpoint_dir=str(tmp_path / "ckpt")):
        counter = Forward.options(node=1, nondeterministic=False).remote()
        relay = Forward.options(node=0).remote(counter)
        actorrt.get(counter.add.remote(1))
        actorrt.checkpoint([counter, relay], timeout=30)
        actorrt.get(counter.add.remote(2))
        if second_sender:
            actorrt.get(relay.add.remote(3))  # the relay's call to the counter: another sender
        assert actorrt.get(counter.value.remote()) == (6 if second_sender else 3)  # the driver took it
        actorrt.kill_node(1)
        expected = 1 if second_sender else 0
        eventually(lambda: _epochs()[1], lambda e: e > 1, timeout=30, what="node 1 back")
        eventually(lambda: _values(counter), lambda v: v is not None and v[0] in (1, 3), timeout=20,
                   what="the counter's value after the failure")
        assert actorrt.rollbacks() == expected
        assert _values(counter) == ([1] if second_sender else [3])
