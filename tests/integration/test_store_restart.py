"""A store shard SIGKILLed mid-run: the head restarts it from its append-only file, every acked
write is there, and the cluster's flushes resume without losing tasks."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import actorrt
from actorrt.core import context
from actorrt.lineage import ids
from actorrt.rpc import common_pb2 as pb
from actorrt.store.lineage_store import LineageStore
from actorrt.store.opening import store_of_view
from tests.support.waiting import eventually


@actorrt.remote
class Counter:
    def __init__(self):
        self.n = 0

    def add(self, k):
        self.n += k
        return self.n


def _store() -> LineageStore:
    view = context.current().worker.membership.view
    return LineageStore(store_of_view(view, None))


def _shard(i: int):
    return context.current().worker.membership.view.store_shards[i]


def test_a_killed_store_shard_comes_back_with_every_acked_write(cluster_with):
    with cluster_with(num_nodes=1, store_shards=2):
        receiver = ids.actor_id(b"test", 1)
        specs = [pb.TaskSpec(task_id=ids.task_id(receiver, b"s", i), receiver=receiver, task_counter=i,
                             version=i % 3, method=f"m{i}") for i in range(1, 3001)]

        async def write_all() -> list[tuple[bytes, int]]:
            store = _store()
            try:
                return await store.write([(s, True) for s in specs])  # each spec whole
            finally:
                await store.aclose()

        acks = asyncio.run(write_all())
        assert sorted(acks) == sorted((s.task_id, s.version) for s in specs)
        pid = _shard(0).pid
        os.kill(pid, signal.SIGKILL)  # right after the acks

        counter = Counter.remote()
        refs = [counter.add.remote(k) for k in range(1, 201)]  # flushes hit the dead shard meanwhile
        try:
            eventually(lambda: _shard(0).restarts == 1 and _shard(0).pid != pid, timeout=60, what="the shard's restart")
        except AssertionError as exc:  # say why: the head's and the shard's own logs
            session_dir = Path(context.current().head_process.session.session_dir)
            logs = [session_dir / "logs" / "head.log", session_dir / "store-0" / "redis.log",
                    session_dir / "store-0" / "redis-start.log"]
            raise AssertionError(f"{exc}\n" + "\n".join(p.read_text(errors="replace")[-3000:] for p in logs
                                                        if p.exists())) from None

        async def read_all() -> dict[bytes, pb.TaskSpec]:
            store = _store()
            try:
                return await store.read([s.task_id for s in specs])
            finally:
                await store.aclose()

        assert asyncio.run(read_all()) == {s.task_id: s for s in specs}
        assert actorrt.get(refs, timeout=60) == [k * (k + 1) // 2 for k in range(1, 201)]
        # Every spec of the workload reached the store in the end: the stashes drain.
        eventually(lambda: all(n["lineage"]["stash_size"] == 0 for n in actorrt.stats()["nodes"])
                   and actorrt.stats()["driver"]["lineage"]["stash_size"] == 0, what="the stashes to drain")


def test_a_recovery_waits_for_a_store_that_is_down_and_rebuilds_its_actors_exactly(cluster_with):
    """The store's only shard and a node die together, and the shard keeps dying for a while after:
    the restarted node's recovery retries its reads (and the survivors' flushes) until the store
    answers, instead of giving its actors up."""
    with cluster_with(num_nodes=2, store_shards=1):
        counter = Counter.options(node=1).remote()
        assert actorrt.get([counter.add.remote(k) for k in range(1, 51)], timeout=60)[-1] == 1275
        node = next(n for n in actorrt.nodes() if n["node"] == 1)
        os.kill(node["pid"], signal.SIGKILL)
        os.kill(_shard(0).pid, signal.SIGKILL)
        outage_ends = None  # the store stays down until 2 s after the node's restart registered
        while outage_ends is None or time.monotonic() < outage_ends:
            try:
                os.kill(_shard(0).pid, signal.SIGKILL)  # every restart of the shard is killed at once
            except ProcessLookupError:
                pass
            if outage_ends is None and any(n["node"] == 1 and n["epoch"] > node["epoch"] and n["state"] == "ALIVE"
                                           for n in actorrt.nodes()):
                outage_ends = time.monotonic() + 2.0
            time.sleep(0.05)
        assert actorrt.get(counter.add.remote(1000), timeout=120) == 2275  # its 50 calls replayed, once each
        restarted = next(n for n in actorrt.stats()["nodes"] if n["node"] == 1)
        assert [(r["actors"], r["tasks_replayed"]) for r in restarted["recoveries"]] == [(1, 51)]
