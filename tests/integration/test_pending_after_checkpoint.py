"""Tasks an actor sent before its checkpoint whose results had not come back: a replay from the
checkpoint does not send them again (the tasks that sent them are behind it), so the restored
actor sends them itself. Here the receiver's node is down while they are sent, the sender then
checkpoints and is killed too: without that, the receiver never gets them."""

from __future__ import annotations

import os
import signal
import time

import actorrt
from tests.support.waiting import eventually


@actorrt.remote
class Log:
    def __init__(self):
        self.seen = []

    def append(self, item):
        self.seen.append(item)

    def items(self):
        return list(self.seen)


@actorrt.remote
class Sender:
    def __init__(self, log):
        self.log = log
        self.sent = 0

    def send(self, n):
        for _ in range(n):
            self.sent += 1
            self.log.append.remote(self.sent)  # fire and forget
        return self.sent


def _pid(slot: int) -> int:
    return next(n["pid"] for n in actorrt.nodes() if n["node"] == slot)


def test_tasks_sent_before_a_checkpoint_reach_a_receiver_that_was_down_after_the_sender_dies(cluster_with):
    with cluster_with(num_nodes=3, store_shards=1):
        log = Log.options(node=2, nondeterministic=True).remote()
        sender = Sender.options(node=1, nondeterministic=False).remote(log)
        assert actorrt.get(sender.send.remote(3)) == 3
        eventually(lambda: actorrt.get(log.items.remote()), lambda items: items == [1, 2, 3], 20)
        time.sleep(0.5)  # the log's execution order reaches the store
        os.kill(_pid(2), signal.SIGSTOP)  # the receiver's node hangs: what is sent to it waits
        try:
            assert actorrt.get(sender.send.remote(4)) == 7
            actorrt.checkpoint([sender], timeout=30)  # covers the sends of 4..7, not yet received
        finally:
            os.kill(_pid(2), signal.SIGKILL)
        actorrt.kill_node(1)  # the sender restarts from its checkpoint
        time.sleep(0.5)
        eventually(lambda: actorrt.get(log.items.remote(), timeout=30), lambda items: items == list(range(1, 8)), 60)
