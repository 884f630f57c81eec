"""Lineage, not data: arguments by reference, kept for replays, never run without.

Oracles are plain Python sums of what the driver sent. Nodes are killed with SIGKILL.
"""

from __future__ import annotations

import numpy as np
import pytest
import redis

import actorrt
from actorrt.core import context
from actorrt.lineage import ids
from tests.support.waiting import eventually

ELEMENTS = 20_000  # float64: 160 KB, above the default 64 KB inline limit


@actorrt.remote
class Producer:
    def make(self, i):
        return i

    def make_array(self, i):
        return np.full(ELEMENTS, float(i))

    def fail(self):
        raise ValueError("no value")

    async def echo_many(self, acc, n):
        """``n`` calls whose results are large: ``acc`` keeps them for this actor's replays, if any."""
        for i in range(n):
            await acc.echo.remote(np.full(ELEMENTS, float(i)))
        return n

    def relay(self, accs, refs):
        """Pass refs this actor does not own on to ``accs``: their owner keeps the values only for
        the tasks that fetch them."""
        for r in refs:
            for acc in accs:
                acc.add_array.remote(r)
        return len(refs)

    async def feed(self, acc, n):
        """Send ``n`` large arrays to ``acc`` (owned, and kept, by this actor's node); returns once
        ``acc`` ran them all."""
        for ref in [acc.add_array.remote(np.full(ELEMENTS, float(i))) for i in range(n)]:
            await ref
        return n


@actorrt.remote
class Accumulator:
    def __init__(self):
        self.total = 0.0
        self.calls = 0

    def add(self, value):
        self.total += value
        self.calls += 1

    def echo(self, array):
        return array

    def add_array(self, array):
        self.total += float(array.sum()) / ELEMENTS
        self.calls += 1

    def state(self):
        return self.total, self.calls


def _stash_sizes() -> list[int]:
    stats = actorrt.stats()
    return [n["lineage"]["stash_size"] for n in stats["nodes"]] + [stats["driver"]["lineage"]["stash_size"]]


def _store_key_sizes() -> list[int]:
    """The size of every value in the lineage store's shards (read with the store's own password)."""
    view = context.current().worker.membership.view
    sizes = []
    for shard in view.store_shards:
        host, _, port = shard.address.rpartition(":")
        client = redis.Redis(host=host, port=int(port), password=view.store_password)
        try:
            for key in client.scan_iter(count=1000):
                if client.type(key) == b"hash":
                    sizes.append(sum(len(v) for v in client.hgetall(key).values()))
        finally:
            client.close()
    return sizes


def test_an_actor_fed_refs_it_no_longer_holds_is_rebuilt_with_them(cluster_with):
    """The refs are produced on node 0, passed to an actor on node 1 and dropped by the driver;
    node 1 is killed: the replay fetches the values again from their owner, which kept them."""
    with cluster_with(num_nodes=2, store_shards=1):
        producer = Producer.options(node=0).remote()
        acc = Accumulator.options(node=1).remote()
        refs = [producer.make.remote(i) for i in range(10)]
        for r in refs:
            acc.add.remote(r)
        assert actorrt.get(acc.state.remote()) == (45, 10)
        del refs, r
        actorrt.kill_node(1)
        assert actorrt.get(acc.state.remote(), timeout=60) == (45, 10)


def test_large_arguments_travel_by_reference_and_a_replay_fetches_them_from_their_sender(cluster_with):
    """Arrays above the inline limit are not in the specs the store holds; after the receiver's
    node is killed, its replay gets them from the sending actor's node."""
    with cluster_with(num_nodes=2, store_shards=1):
        producer = Producer.options(node=0).remote()
        acc = Accumulator.options(node=1).remote()
        assert actorrt.get(producer.feed.remote(acc, 12)) == 12
        big = np.full(500_000, 100.0)  # 4 MB, from the driver
        actorrt.get(acc.add_array.remote(big))
        expected = (float(sum(range(12))) + 100.0 * big.size / ELEMENTS, 13)
        assert actorrt.get(acc.state.remote()) == expected
        sizes = _store_key_sizes()
        assert sizes and max(sizes) < ELEMENTS * 8 // 4, max(sizes)  # no array went into the store
        actorrt.kill_node(1)
        assert actorrt.get(acc.state.remote(), timeout=60) == expected
        # Every process's stash drains after the recovery: everything it held reached the store.
        eventually(_stash_sizes, lambda sizes: sizes == [0] * len(sizes), 20)


def test_both_the_sender_and_the_receiver_killed_the_receiver_waits_for_the_senders_replay(cluster_with):
    with cluster_with(num_nodes=3, store_shards=1):
        producer = Producer.options(node=0).remote()
        acc = Accumulator.options(node=1).remote()
        assert actorrt.get(producer.feed.remote(acc, 8)) == 8
        expected = (float(sum(range(8))), 8)
        assert actorrt.get(acc.state.remote()) == expected
        actorrt.kill_node(0)
        actorrt.kill_node(1)
        assert actorrt.get(acc.state.remote(), timeout=90) == expected


def test_pinned_arguments_spill_to_disk_past_the_budget_and_are_read_back_for_a_replay(cluster_with):
    with cluster_with(num_nodes=2, store_shards=1, pinned_budget_bytes=400_000):
        producer = Producer.options(node=0).remote()
        acc = Accumulator.options(node=1).remote()
        assert actorrt.get(producer.feed.remote(acc, 10)) == 10
        node0 = next(n for n in actorrt.stats()["nodes"] if n["node"] == 0)
        assert node0["objects_kept"]["spilled_bytes"] > 0, node0["objects_kept"]
        assert node0["objects_kept"]["pinned_bytes"] <= 400_000
        actorrt.kill_node(1)
        assert actorrt.get(acc.state.remote(), timeout=60) == (float(sum(range(10))), 10)


def test_pinned_arguments_are_released_once_the_receiver_checkpoints(cluster_with):
    with cluster_with(num_nodes=2, store_shards=1):
        producer = Producer.options(node=0).remote()
        acc = Accumulator.options(node=1).remote()
        assert actorrt.get(producer.feed.remote(acc, 6)) == 6
        actorrt.get(acc.state.remote())
        kept = next(n for n in actorrt.stats()["nodes"] if n["node"] == 0)["objects_kept"]
        assert kept["pinned_bytes"] >= 6 * ELEMENTS * 8
        actorrt.checkpoint([acc])

        def released():
            return next(n for n in actorrt.stats()["nodes"] if n["node"] == 0)["objects_kept"]

        after = eventually(released, lambda k: k["pinned_bytes"] == 0, 10)
        assert after["released_bytes"] >= 6 * ELEMENTS * 8


OTHER_DRIVER = """
import pickle, sys
import numpy as np
import actorrt
from test_module import Accumulator, ELEMENTS

actorrt.init(address=sys.argv[1])
acc = Accumulator.options(node=1).remote()
for i in range(3):
    acc.add_array.remote(np.full(ELEMENTS, float(i)))
assert actorrt.get(acc.state.remote()) == (3.0, 3)
with open(sys.argv[2], "wb") as f:
    pickle.dump(acc, f)
actorrt.shutdown()
"""


def test_an_argument_whose_holder_is_gone_for_good_stops_the_replay_naming_it(cluster_with, tmp_path):
    """Arrays sent by a driver that has exited are gone with it. A replay that needs one stops its
    actor with an error naming the object and the task, instead of running without it."""
    import os
    import pickle
    import shutil
    import subprocess
    import sys

    from actorrt.cluster.session import TOKEN_ENV

    shutil.copy(__file__, tmp_path / "test_module.py")
    (tmp_path / "other_driver.py").write_text(OTHER_DRIVER)
    with cluster_with(num_nodes=2, store_shards=1) as info:
        env = dict(os.environ, **{TOKEN_ENV: context.current().token})
        env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), os.getcwd(), env.get("PYTHONPATH", "")])
        done = subprocess.run([sys.executable, str(tmp_path / "other_driver.py"), info["address"],
                               str(tmp_path / "acc.pickle")], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        acc = pickle.loads((tmp_path / "acc.pickle").read_bytes())
        actorrt.kill_node(1)  # the replay of acc needs the arrays the other driver owned
        missing = r"replay of its task #\d+ from \w+ \(add_array\) needs object \w+, which is gone"
        with pytest.raises(actorrt.ActorDiedError, match=missing):
            actorrt.get(acc.state.remote(), timeout=60)


def test_nothing_is_kept_for_replays_where_nothing_is_replayed(cluster_with):
    with cluster_with(num_nodes=2, store_shards=1, ft="none"):
        producer = Producer.options(node=0).remote()
        acc = Accumulator.options(node=1).remote()
        assert actorrt.get(producer.feed.remote(acc, 6)) == 6
        refs = [producer.make_array.remote(i) for i in range(3)]
        actorrt.get([acc.add_array.remote(r) for r in refs])
        del refs
        assert actorrt.get(producer.echo_many.remote(acc, 24)) == 24
        stats = actorrt.stats()
        assert all(n["objects_kept"]["pinned_bytes"] == n["objects_kept"]["spilled_bytes"] == 0
                   for n in stats["nodes"]), [n["objects_kept"] for n in stats["nodes"]]
        kept = next(a["results_kept_bytes"] for n in stats["nodes"] for a in n["actors"] if a["class"] == "Accumulator")
        assert kept <= 17 * (ELEMENTS * 8 + 1024), kept  # the window, not all 24 large results


@pytest.mark.parametrize("ft", ["lineage_stash", "none"])
def test_a_drivers_large_results_are_let_go_once_it_has_them(cluster_with, ft):
    """A driver never re-sends a call it has the result of: each call says so, and the actor keeps
    only the results the driver may still ask for, not its last sixteen."""
    with cluster_with(num_nodes=1, store_shards=1, ft=ft):
        producer = Producer.remote()
        for i in range(20):
            assert actorrt.get(producer.make_array.remote(i))[0] == i
        stats = actorrt.stats()
        kept = next(a["results_kept_bytes"] for n in stats["nodes"] for a in n["actors"] if a["class"] == "Producer")
        assert kept <= ELEMENTS * 8 + 1024, kept  # the last one: its result came after its call left
        pending = [producer.make_array.remote(i) for i in range(3)]
        assert [a[0] for a in actorrt.get(pending)] == [0, 1, 2]


def test_a_replayed_task_whose_argument_was_a_task_error_fails_again_and_the_actor_goes_on(cluster_with):
    with cluster_with(num_nodes=2, store_shards=1):
        producer = Producer.options(node=0).remote()
        acc = Accumulator.options(node=1).remote()
        with pytest.raises(actorrt.TaskError, match="no value"):
            actorrt.get(acc.add.remote(producer.fail.remote()))
        actorrt.get(acc.add.remote(producer.make.remote(5)))
        assert actorrt.get(acc.state.remote()) == (5, 1)
        actorrt.kill_node(1)
        assert actorrt.get(acc.state.remote(), timeout=60) == (5, 1)


def test_two_actors_that_share_a_fetched_argument_each_have_it_kept_for_their_replay(cluster_with):
    """Both actors' tasks use one copy fetched by their node; the owner keeps the value for each
    task, so one actor's checkpoint does not release what the other's replay needs."""
    with cluster_with(num_nodes=2, store_shards=1):
        producer = Producer.options(node=0).remote()
        first, second = (Accumulator.options(node=1).remote() for _ in range(2))
        refs = [producer.make_array.remote(i) for i in range(6)]  # owned by the driver
        assert actorrt.get(producer.relay.remote([first, second], refs)) == 6
        expected = (float(sum(range(6))), 6)

        def states():  # the relay's calls and the driver's come by different paths
            return actorrt.get([first.state.remote(), second.state.remote()])

        eventually(states, lambda got: got == [expected, expected], 20)
        actorrt.checkpoint([first])
        del refs

        def kept_by_driver():
            return actorrt.stats()["driver"]["objects_kept"]

        kept = eventually(kept_by_driver, lambda k: k["released_bytes"] == 0 and k["pinned_objects"] == 6, 10)
        assert kept["pinned_bytes"] >= 6 * ELEMENTS * 8
        actorrt.kill_node(1)
        assert actorrt.get([first.state.remote(), second.state.remote()], timeout=60) == [expected, expected]


def _task_records() -> dict[bytes, int]:
    """Per task ID, how many records of it the lineage store's shards hold (one per writer group)."""
    view = context.current().worker.membership.view
    copies: dict[bytes, int] = {}
    for shard in view.store_shards:
        host, _, port = shard.address.rpartition(":")
        client = redis.Redis(host=host, port=int(port), password=view.store_password)
        try:
            for key in client.scan_iter(match=b"task:*", count=1000):
                task_id = key[len(b"task:{00}"):]
                copies[task_id] = copies.get(task_id, 0) + 1
        finally:
            client.close()
    return copies


def test_a_task_is_written_once_by_its_receiver_and_its_sender_hears_it_is_committed(cluster_with):
    """The driver and an actor on node 0 send tasks to a deterministic actor on node 1: only the
    receiver writes them, and every stash, the senders' included, drains."""
    with cluster_with(num_nodes=2, store_shards=2):
        producer = Producer.options(node=0, nondeterministic=False).remote()
        acc = Accumulator.options(node=1, nondeterministic=False).remote()
        refs = [acc.add.remote(i) for i in range(40)]
        actorrt.get(refs)
        # Until the driver hears them committed, the lineage of its next task (the feed, which
        # passes acc's handle) holds them, and the process it goes to writes them too, as every
        # holder of forwarded lineage does (docs/design.md): wait, so only the receiver writes.
        eventually(_stash_sizes, lambda sizes: sizes == [0] * len(sizes), 20)
        assert actorrt.get(producer.feed.remote(acc, 5)) == 5
        assert actorrt.get(acc.state.remote()) == (sum(range(40)) + float(sum(range(5))), 45)
        eventually(_stash_sizes, lambda sizes: sizes == [0] * len(sizes), 20)
        sent_to_acc = [ids.producer_task(r.object_id) for r in refs]
        copies = _task_records()
        assert [copies.get(task_id) for task_id in sent_to_acc] == [1] * len(sent_to_acc)
