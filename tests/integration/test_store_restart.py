"""A store shard SIGKILLed mid-run: the head restarts it from its append-only file, every acked
write is there, and the cluster's flushes resume without losing tasks."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import actorrt
from actorrt.core import context
from actorrt.lineage import ids
from actorrt.rpc import common_pb2 as pb
from actorrt.store.clients import open_store
from actorrt.store.lineage_store import LineageStore
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
    return LineageStore(open_store(view.store_url, [s.address for s in view.store_shards], view.store_password))


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
