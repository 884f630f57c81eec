"""The iterative allreduce of examples/allreduce.py (actorrt.collective), killed mid-run: bit-identical
to a failure-free run and to a plain-numpy computation of the same summation order; under the
global-rollback baseline, the group resumes from its last checkpoint with the same result."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import actorrt

_spec = importlib.util.spec_from_file_location("allreduce", Path(__file__).parents[2] / "examples" / "allreduce.py")
allreduce = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(allreduce)

WORKERS, SIZE, ITERATIONS = 4, 20_000, 8


def test_allreduce_is_bit_identical_after_a_node_is_killed_mid_iteration(cluster_with):
    expected = allreduce.reference(WORKERS, SIZE, ITERATIONS)
    with cluster_with(num_nodes=2, store_shards=2):
        clean = allreduce.run(allreduce.create_group(WORKERS, SIZE), ITERATIONS)

        def kill_in_the_middle(iteration: int) -> None:  # its members are in the call now
            if iteration == ITERATIONS // 2:
                actorrt.kill_node(1)

        killed = allreduce.run(allreduce.create_group(WORKERS, SIZE), ITERATIONS, kill_in_the_middle)
        recovery = next(n for n in actorrt.stats()["nodes"] if n["node"] == 1)["recoveries"]
    assert all(r.tobytes() == expected.tobytes() for r in clean)
    assert all(r.tobytes() == expected.tobytes() for r in killed)
    # Both groups' workers on node 1 were rebuilt (2 per group), by replay.
    assert len(recovery) == 1 and recovery[0]["actors"] == 4 and recovery[0]["tasks_replayed"] > 4, recovery


def test_the_global_rollback_baseline_resumes_from_the_last_checkpoint_bit_identically(cluster_with):
    expected = allreduce.reference(WORKERS, SIZE, ITERATIONS)
    with cluster_with(num_nodes=2, store_shards=1, ft="checkpoint"):
        group = allreduce.create_group(WORKERS, SIZE)
        kills = [ITERATIONS // 2 + 1]  # one kill, two iterations after the checkpoint before it

        def kill_once(iteration: int) -> None:
            if kills and iteration == kills[0]:
                kills.clear()
                actorrt.kill_node(1)

        results = allreduce.run(group, ITERATIONS, kill_once, checkpoint_every=ITERATIONS // 2)
        nodes = actorrt.stats()["nodes"]
    assert all(r.tobytes() == expected.tobytes() for r in results)
    # Both nodes went back (the survivor too), each restoring its two workers, replaying nothing.
    for node in nodes:
        assert [(r["actors"], r["from_checkpoint"], r["tasks_replayed"]) for r in node["recoveries"]] == [(2, 2, 0)]
        assert node["epoch"] >= 2  # more if a loaded machine stalled a node past its heartbeat timeout
