"""The global-rollback baseline (``ft="checkpoint"``): a global checkpoint is consistent, so a
rollback to it loses no call and applies none twice. Real node processes, SIGKILL."""

from __future__ import annotations

import asyncio
import time

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
