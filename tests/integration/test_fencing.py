"""A node that hangs (SIGSTOP) past the heartbeat timeout is declared dead and replaced; when it
resumes (SIGCONT) it must not act: it runs none of the tasks that reached it while it hung, sends
nothing, and exits. Oracle: a file each task appends its process id to, outside the runtime."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import actorrt
from actorrt.util.processes import process_alive
from tests.integration.test_heir import node_added_by_hand
from tests.support.waiting import eventually

HEARTBEAT_TIMEOUT_S = 2.0


@actorrt.remote
class Witness:
    """Appends ``pid i`` to a file for every task it runs: a side effect no replay can hide."""

    def __init__(self, path):
        self.path = path

    def record(self, i):
        with open(self.path, "a") as f:
            f.write(f"{os.getpid()} {i}\n")
        return os.getpid(), i


def _runs(path: Path) -> list[tuple[int, int]]:
    return [tuple(map(int, line.split())) for line in path.read_text().splitlines()]


def _hang_replace_resume(witness, pid: int, path: Path, replaced) -> None:
    """Run 0..4, hang ``pid``, send 5..9 while it hangs, wait until ``replaced()``, resume it."""
    assert actorrt.get([witness.record.remote(i) for i in range(5)], timeout=60) == [(pid, i) for i in range(5)]
    os.kill(pid, signal.SIGSTOP)
    try:
        late = [witness.record.remote(i) for i in range(5, 10)]  # they reach the hung process's socket
        time.sleep(0.5)
        eventually(replaced, timeout=HEARTBEAT_TIMEOUT_S * 10, what="the hung node to be declared dead")
    finally:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass  # the head killed it when it declared it dead (a node it started)
    results = actorrt.get(late, timeout=60)
    assert [i for _, i in results] == list(range(5, 10))
    assert all(p != pid for p, _ in results), results  # run by the replacement
    eventually(lambda: not process_alive(pid), timeout=30, what="the resumed stale node to exit")
    time.sleep(0.5)  # anything it still did would be in the file by now
    stale_runs = [i for p, i in _runs(path) if p == pid]
    assert stale_runs == list(range(5)), f"the stale incarnation ran tasks after it hung: {stale_runs}"
    assert actorrt.get(witness.record.remote(10), timeout=60)[1] == 10  # the actor serves on


def test_a_hand_added_node_that_resumes_after_its_heir_took_over_does_nothing_and_exits(cluster_with, tmp_path):
    with cluster_with(num_nodes=1, store_shards=1, heartbeat_timeout=HEARTBEAT_TIMEOUT_S), \
            node_added_by_hand(tmp_path) as added:
        path = tmp_path / "runs.txt"
        witness = Witness.options(node=added["node"]).remote(str(path))

        def replaced() -> bool:
            node = next(n for n in actorrt.nodes() if n["node"] == added["node"])
            return node["state"] == "DEAD" and node["heir"] == 0

        _hang_replace_resume(witness, added["pid"], path, replaced)


def test_a_head_started_node_that_hangs_is_replaced_and_its_old_process_does_nothing(cluster_with, tmp_path):
    with cluster_with(num_nodes=2, store_shards=1, heartbeat_timeout=HEARTBEAT_TIMEOUT_S):
        path = tmp_path / "runs.txt"
        witness = Witness.options(node=1).remote(str(path))
        before = next(n for n in actorrt.nodes() if n["node"] == 1)

        def replaced() -> bool:
            node = next(n for n in actorrt.nodes() if n["node"] == 1)
            return node["epoch"] > before["epoch"] and node["state"] == "ALIVE"

        _hang_replace_resume(witness, before["pid"], path, replaced)


def test_a_node_that_hangs_after_its_actors_standby_took_over_does_nothing_and_exits(cluster_with, tmp_path):
    """The actor's standby (on node 0) takes its place when the hung node is declared dead; the node
    was added by hand, so nothing kills it: it resumes, and must act no more."""
    with cluster_with(num_nodes=1, store_shards=1, heartbeat_timeout=HEARTBEAT_TIMEOUT_S), \
            node_added_by_hand(tmp_path) as added:
        path = tmp_path / "runs.txt"
        witness = Witness.options(node=added["node"], standby=1, checkpoint_every=2).remote(str(path))
        actor_id = witness.actor_id.hex()
        _hang_replace_resume(witness, added["pid"], path, lambda: actorrt.stats()["moved_actors"] == {actor_id: 0})
