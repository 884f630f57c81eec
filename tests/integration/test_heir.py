"""A node the head cannot restart (added by hand, as from another machine) is killed: a live node
inherits its actors and rebuilds them by replay. Oracles: what the surviving callers observed."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

import actorrt
from actorrt.cluster.session import TOKEN_ENV
from actorrt.core import context
from tests.support.waiting import eventually


@actorrt.remote
class Log:
    def __init__(self):
        self.entries = []

    def append(self, entry):
        self.entries.append(entry)
        return len(self.entries)

    def state(self):
        return self.entries


@actorrt.remote
class Producer:
    def __init__(self, name, log):
        self.name, self.log, self.produced = name, log, 0

    async def produce(self):
        self.produced += 1
        return await self.log.append.remote((self.name, self.produced))


@actorrt.remote
class Counter:
    def __init__(self):
        self.n = 0

    def add(self, k):
        self.n += k
        return self.n


@actorrt.remote
class Parent:
    """Creates its children where the runtime places them (spread over the live nodes)."""

    def __init__(self, children):
        self.children = [Counter.remote() for _ in range(children)]

    def slots(self):
        return [child.slot for child in self.children]

    async def add_all(self, k):
        return [await child.add.remote(k) for child in self.children]


@contextlib.contextmanager
def node_added_by_hand(tmp_path):
    """``python -m actorrt.cluster.node`` against the running head: a slot the head does not manage."""
    session = context.current().head_process.session
    with open(tmp_path / "node.log", "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "actorrt.cluster.node", "--head", session.head_address],
                                   env=dict(os.environ, **{TOKEN_ENV: session.token}), stdout=log,
                                   stderr=subprocess.STDOUT)
    try:
        yield eventually(lambda: [n for n in actorrt.nodes() if n["pid"] == process.pid and n["state"] == "ALIVE"],
                         bool, 60, "the added node")[0]
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def test_a_live_node_inherits_the_actors_of_a_node_that_will_not_come_back(cluster_with, tmp_path):
    with cluster_with(num_nodes=2, store_shards=1), node_added_by_hand(tmp_path) as added:
        assert not added["managed"]
        log = Log.options(node=added["node"], nondeterministic=True).remote()  # two senders interleave
        producers = {name: Producer.options(node=i).remote(name, log) for i, name in enumerate("ab")}
        calls = []  # (producer, its k-th call, ref): the survivors' view of where each entry went
        for k in range(1, 31):
            calls += [(name, k, p.produce.remote()) for name, p in producers.items()]
            if k == 10:  # the log has run 20 calls; 40 more are sent while and after it is rebuilt
                actorrt.get([ref for _, _, ref in calls], timeout=60)
                os.kill(added["pid"], signal.SIGKILL)
        positions = actorrt.get([ref for _, _, ref in calls], timeout=120)

        dead = next(n for n in actorrt.nodes() if n["node"] == added["node"])
        assert dead["state"] == "DEAD" and dead["heir"] in (0, 1), dead
        entries = actorrt.get(log.state.remote(), timeout=60)
        # Every entry once, and where each caller was told it went: no call lost, doubled or moved.
        assert sorted(positions) == list(range(1, 61))
        assert all(entries[pos - 1] == (name, k) for (name, k, _), pos in zip(calls, positions, strict=True))
        assert actorrt.get(log.append.remote(("driver", 1)), timeout=60) == 61  # it serves new calls

        heir = next(n for n in actorrt.stats()["nodes"] if n["node"] == dead["heir"])
        assert any(r["slots"] == [added["node"]] and r["actors"] >= 1 for r in heir["recoveries"]), heir["recoveries"]

        # The heir fails in turn: its restart rebuilds its own actors and those it inherited.
        actorrt.kill_node(dead["heir"])
        more = [(name, k, p.produce.remote()) for k in range(31, 41) for name, p in producers.items()]
        more_positions = actorrt.get([ref for _, _, ref in more], timeout=120)
        entries = actorrt.get(log.state.remote(), timeout=60)
        assert sorted(more_positions) == list(range(62, 82)) and entries[60] == ("driver", 1)
        assert all(entries[pos - 1] == (name, k) for (name, k, _), pos in zip(more, more_positions, strict=True))
        restarted = next(n for n in actorrt.stats()["nodes"] if n["node"] == dead["heir"])
        assert restarted["recoveries"][0]["slots"] == sorted([dead["heir"], added["node"]]), restarted["recoveries"]


def test_a_replayed_actor_places_the_actors_it_creates_where_the_lost_run_did(cluster_with, tmp_path):
    with cluster_with(num_nodes=2, store_shards=1), node_added_by_hand(tmp_path) as added:
        parent = Parent.options(node=added["node"]).remote(6)
        slots = actorrt.get(parent.slots.remote(), timeout=60)
        assert set(slots) == {0, 1, added["node"]}
        for k in range(1, 6):
            actorrt.get(parent.add_all.remote(k), timeout=60)
        os.kill(added["pid"], signal.SIGKILL)
        # Replayed by its heir with two live nodes, not three: the logged placement still holds, so
        # it talks to the children it created (one of them rebuilt by the heir too), not to copies.
        assert actorrt.get(parent.slots.remote(), timeout=60) == slots
        assert actorrt.get(parent.add_all.remote(100), timeout=60) == [115] * 6
