"""Checkpoints: recovery restores the newest one and replays only what came after it, and the
collector keeps the lineage store bounded. Real node processes, SIGKILL, real Redis shards."""

from __future__ import annotations

import json
from pathlib import Path

import actorrt
from tests.support.store_reads import records_sent_to
from tests.support.waiting import eventually


@actorrt.remote
class Tally:
    """Order-sensitive state with its own checkpoint hooks; counts how it was rebuilt."""

    def __init__(self):
        self.values = []
        self.restored = 0

    def add(self, value):
        self.values.append(value)

    def state(self):
        return self.values, self.restored

    def checkpoint(self):
        return {"values": list(self.values), "restored": self.restored}

    def restore(self, state):
        self.values = state["values"]
        self.restored = state["restored"] + 1


@actorrt.remote
class Plain:
    """No hooks: the whole instance is pickled."""

    def __init__(self, start):
        self.total = start
        self.seen = 0

    def add(self, value):
        self.total = (self.total * 31 + value) % 1_000_003
        self.seen += 1

    def state(self):
        return self.total, self.seen


def _recovery_of(node: int) -> dict:
    recoveries = next(n for n in actorrt.stats()["nodes"] if n["node"] == node)["recoveries"]
    assert len(recoveries) == 1, recoveries
    return recoveries[0]


def test_a_killed_actor_restores_its_checkpoint_and_replays_only_the_tasks_after_it(cluster_with, tmp_path):
    with cluster_with(num_nodes=2, store_shards=2, checkpoint_dir=tmp_path):
        tally = Tally.options(node=1).remote()
        plain = Plain.options(node=1, nondeterministic=False).remote(7)
        for v in range(300):
            tally.add.remote(v)
            plain.add.remote(v)
        manifest = actorrt.checkpoint([tally, plain], timeout=60)
        for v in range(300, 340):
            tally.add.remote(v)
            plain.add.remote(v)
        assert actorrt.get(tally.state.remote(), timeout=60) == (list(range(340)), 0)
        before = actorrt.get(plain.state.remote(), timeout=60)

        actorrt.kill_node(1)
        assert actorrt.get(tally.state.remote(), timeout=60) == (list(range(340)), 1)  # restored once
        assert actorrt.get(plain.state.remote(), timeout=60) == before

        recovery = _recovery_of(1)
        assert recovery["actors"] == 2 and recovery["from_checkpoint"] == 2
        # 40 adds and 1 state() per actor ran after the checkpoint: that, not 300+, is replayed.
        assert recovery["tasks_replayed"] == 2 * 41, recovery
        assert recovery["detection_ms"] > 0 and recovery["restart_ms"] > 0, recovery

        # The manifest is on disk, and names each actor's checkpoint file.
        files = sorted((tmp_path / "global").glob("*.json"))
        assert [json.loads(f.read_text()) for f in files] == [manifest]
        assert set(manifest["actors"]) == {tally.actor_id.hex(), plain.actor_id.hex()}
        assert all(Path(c["path"]).is_file() and c["seq"] == 1 for c in manifest["actors"].values())


def test_checkpoints_every_n_tasks_bound_the_store_and_the_replay(cluster_with):
    every, n = 50, 1000
    with cluster_with(num_nodes=2, store_shards=2):
        bounded = Plain.options(node=1, checkpoint_every=every).remote(1)
        unbounded = Plain.options(node=1).remote(1)
        for v in range(n):
            bounded.add.remote(v)
            unbounded.add.remote(v)
        expected = actorrt.get(unbounded.state.remote(), timeout=60)
        assert actorrt.get(bounded.state.remote(), timeout=60) == expected

        # The collector runs in the background after each checkpoint; the store then holds at
        # most the two last intervals of the checkpointed actor, and everything of the other. A
        # copy the driver's flush writes after an interval's collection passed goes at the next
        # one: the actor is idle now, so an interval's worth of those may stay (a loaded 2-core
        # machine sees a few; the collection also trails the checkpoints by seconds there).
        eventually(lambda: records_sent_to(unbounded.actor_id), lambda held: held == n + 2, 30)
        eventually(lambda: records_sent_to(bounded.actor_id), lambda held: held <= 3 * every + 2, 30)

        actorrt.kill_node(1)
        assert actorrt.get(bounded.state.remote(), timeout=60) == expected
        assert actorrt.get(unbounded.state.remote(), timeout=60) == expected
        recovery = _recovery_of(1)
        assert recovery["from_checkpoint"] == 1
        # The bounded actor replays at most one interval; the other replays its whole history.
        assert n + 2 <= recovery["tasks_replayed"] <= n + 2 + every, recovery
