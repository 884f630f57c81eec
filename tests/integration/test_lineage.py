"""The lineage stash on a real cluster: flushes, versions in the store, draining, WriteFirst."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

import actorrt
from actorrt.core import context


@actorrt.remote
class Reducer:
    """A nondeterministic receiver: records the tasks it executed, in order."""

    def __init__(self):
        self.order = []
        self.total = 0

    def add(self, x):
        self.order.append(context.current_task_id())
        self.total += x
        return self.total

    def executed(self):
        return self.order


@actorrt.remote
class Mapper:
    def __init__(self, reducer):
        self.reducer = reducer

    def emit(self, x):
        self.reducer.add.remote(x)  # fire-and-forget, from inside a task

    def ping(self):
        return True


@actorrt.remote
class Probe:
    """Looks at its own task while it runs."""

    async def stored_version(self):
        worker = context.current().worker
        task_id = context.current_task_id()
        held = await worker.ft.store.read([task_id])
        return held[task_id].version if task_id in held else None

    def committed_here(self):
        worker = context.current().worker
        return worker.ft.stash.is_committed(context.current_task_id())

    async def commit_then_look(self):
        """``commit_lineage()``, then: specs it wrote, and whether this task and its lineage are
        committed (each, before and after)."""
        stash = context.current().worker.ft.stash
        task_id = context.current_task_id()

        def everything_committed():
            spec = stash.get(task_id)
            return spec is None or (stash.is_committed(task_id) and not stash.uncommitted_lineage(spec))

        before = everything_committed()
        written = await actorrt.commit_lineage()
        return written, before, everything_committed()


def _lineage(stats):
    return [n["lineage"] for n in stats["nodes"] if n["state"] == "ALIVE"] + [stats["driver"]["lineage"]]


def wait_drained(timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stats = actorrt.stats()
        if all(x["stash_size"] == 0 for x in _lineage(stats)):
            return stats
        time.sleep(0.1)
    raise AssertionError(f"stashes did not drain: {[x['stash_size'] for x in _lineage(actorrt.stats())]}")


@pytest.fixture
def stash_cluster(cluster_with):
    with cluster_with(num_nodes=2, store_shards=2, ft="lineage_stash", store_delay_ms=50):
        yield


def test_nondeterministic_order_is_logged_as_new_versions_and_stashes_drain(stash_cluster):
    reducer = Reducer.options(node=1, nondeterministic=True).remote()
    mappers = [Mapper.options(node=0).remote(reducer) for _ in range(3)]
    actorrt.get([m.ping.remote() for m in mappers], timeout=30)
    for i in range(60):
        mappers[i % 3].emit.remote(i)
    deadline = time.monotonic() + 30
    while actorrt.get(reducer.add.remote(0), timeout=30) != sum(range(60)):
        assert time.monotonic() < deadline
    stats = wait_drained()

    nodes = {n["node"]: n["lineage"] for n in stats["nodes"]}
    assert nodes[0]["flushed"] > 60 and nodes[1]["flushed"] > 60
    assert nodes[0]["committed"] > 0 and nodes[1]["evicted"] > 0
    # Store latency includes the simulated 50 ms ack delay.
    assert nodes[1]["store_latency_ms_p50"] >= 50

    # The store holds, for every task the reducer ran, the version that names its true predecessor.
    order = actorrt.get(reducer.executed.remote(), timeout=30)
    store = context.current().worker.ft.store
    held = context.current().call(store.read(order))
    assert set(held) == set(order)
    for before, task in zip(order, order[1:], strict=False):
        assert held[task].predecessor_id == before
        assert held[task].dependencies[1] == before
    # Three senders interleave, so most tasks were reordered: version 1.
    assert sum(held[t].version == 1 for t in order) > len(order) // 2


def test_lineage_is_forwarded_while_uncommitted(stash_cluster):
    reducer = Reducer.options(node=0, nondeterministic=True).remote()
    mapper = Mapper.options(node=1).remote(reducer)
    # The mapper's tasks come from the driver and are uncommitted for 50 ms: each emit forwards
    # the uncommitted mapper task it runs in (its parent) along with the reducer's task.
    actorrt.get([mapper.emit.remote(i) for i in range(20)], timeout=30)
    stats = wait_drained()
    node1 = next(n for n in stats["nodes"] if n["node"] == 1)["lineage"]
    assert node1["forwarded_mean"] > 0


def test_lineage_stash_does_not_wait_for_the_store(cluster_with):
    with cluster_with(num_nodes=1, store_shards=1, ft="lineage_stash", store_delay_ms=500):
        probe = Probe.remote()
        assert actorrt.get(probe.committed_here.remote(), timeout=30) is False


def test_commit_lineage_waits_until_the_task_and_its_lineage_are_committed(cluster_with):
    with cluster_with(num_nodes=1, store_shards=1, ft="lineage_stash", store_delay_ms=500):
        probe = Probe.remote()
        written, before, after = actorrt.get(probe.commit_then_look.remote(), timeout=30)
        assert (before, after) == (False, True)
        assert written >= 2  # its own version (its order), and the constructor it ran after
        with pytest.raises(actorrt.ActorRTError, match="actor method"):
            asyncio.run(actorrt.commit_lineage())  # a driver has no task to commit


def test_write_first_runs_a_task_only_after_the_store_holds_it(cluster_with):
    with cluster_with(num_nodes=1, store_shards=1, ft="write_first", store_delay_ms=20):
        probe = Probe.options(nondeterministic=False).remote()
        assert actorrt.get(probe.stored_version.remote(), timeout=30) == 0
        ndprobe = Probe.options(nondeterministic=True).remote()
        # A nondeterministic receiver records its order (version 1) before the task runs.
        assert actorrt.get(ndprobe.stored_version.remote(), timeout=30) == 1
        assert actorrt.stats()["fault_tolerance"]["mode"] == "write_first"


def test_invalid_fault_tolerance_options_are_rejected():
    with pytest.raises(ValueError, match="ft must be one of"):
        actorrt.init(ft="sometimes")
    with pytest.raises(ValueError, match="store_delay_ms"):
        actorrt.init(store_delay_ms=-1)
    with pytest.raises(ValueError, match="max_forwards"):
        actorrt.init(max_forwards=-2)
    assert not actorrt.is_initialized()


@contextlib.contextmanager
def _stalled(pids: list[int], seconds: float = 3.0) -> Iterator[threading.Timer]:
    """The store shards ``pids`` SIGSTOPped: they answer nothing for ``seconds``, then a timer
    (alive until then) SIGCONTs them."""
    def resume() -> None:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)

    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    timer = threading.Timer(seconds, resume)
    timer.start()
    try:
        yield timer
    finally:
        timer.join()


def test_a_stalled_store_shard_slows_flushes_not_tasks(stash_cluster):
    view = context.current().worker.membership.view
    reducer = Reducer.options(node=1, nondeterministic=True).remote()
    actorrt.get(reducer.add.remote(0), timeout=30)
    with _stalled([view.store_shards[0].pid]) as stall:
        time.sleep(0.2)
        results = actorrt.get([reducer.add.remote(1) for _ in range(200)], timeout=30)
        assert results[-1] == 200
        # Tasks ran while the shard was stalled: their specs wait in the stashes, uncommitted.
        assert stall.is_alive()
        assert sum(x["stash_size"] for x in _lineage(actorrt.stats())) > 0
    wait_drained()


def test_a_full_stash_makes_submitters_wait_instead_of_growing(cluster_with):
    with cluster_with(num_nodes=1, store_shards=2, ft="lineage_stash", stash_limit=50):
        view = context.current().worker.membership.view
        reducer = Reducer.remote()
        actorrt.get(reducer.add.remote(0), timeout=30)
        with _stalled([shard.pid for shard in view.store_shards]):  # the whole store answers nothing for 3 s
            time.sleep(0.2)
            refs = []
            submitter = threading.Thread(target=lambda: refs.extend(reducer.add.remote(1) for _ in range(400)))
            submitter.start()
            time.sleep(1.5)
            driver_stash = context.current().worker.ft.stats().stash_size
            assert submitter.is_alive(), "400 submissions went through a stash bounded at 50"
            assert driver_stash <= 50 + 10
        submitter.join(30)
        assert not submitter.is_alive()
        assert actorrt.get(refs[-1], timeout=30) == 400
        wait_drained()
