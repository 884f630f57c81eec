"""Iterative allreduce with actorrt.collective: each iteration, the workers average their arrays.

Each worker is an actor; an iteration is one task per worker that awaits
``collective.allreduce(data, op="mean")``. The members sum in rank order, so the result is the same
bit for bit in every run, with or without failures: ``--kill`` SIGKILLs node 1 in the middle
iteration, its workers are replayed (fetching the results of the calls they made before from the
survivors) and the run ends as a failure-free one would, which a plain-numpy computation checks.

    python examples/allreduce.py [--workers 4] [--size 100000] [--iterations 10] [--kill]
        [--ft checkpoint --checkpoint-every 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

import actorrt
from actorrt import collective


@actorrt.remote
class Worker:
    def __init__(self, rank: int, size: int, seed: int = 0) -> None:
        self.data = np.random.default_rng(seed + rank).standard_normal(size)

    async def iterate(self, iteration: int) -> int:
        self.data = await collective.allreduce(self.data, op="mean")
        return iteration

    def result(self) -> np.ndarray:
        return self.data


def create_group(workers: int, size: int, nodes: int = 2, seed: int = 0) -> list:
    """``workers`` workers, worker r on node r % nodes, made a collective group."""
    group = [Worker.options(node=r % nodes).remote(r, size, seed) for r in range(workers)]
    collective.create_collective_group(group)
    return group


def run(group: list, iterations: int, on_iteration: Callable[[int], None] | None = None,
        checkpoint_every: int | None = None, timeout: float = 120.0) -> list[np.ndarray]:
    """Run ``iterations`` iterations; returns every worker's final array.

    ``on_iteration(i)`` is called once iteration ``i`` is submitted (to inject failures). With
    ``checkpoint_every``, the group is checkpointed before the first iteration and every that many
    iterations; under ``ft="checkpoint"`` a failure rolls the group back to the last of them, and
    the run goes on from the iteration that checkpoint came before.
    """
    checkpointed, iteration, seen = 0, 0, actorrt.rollbacks()
    while iteration < iterations:
        try:
            if checkpoint_every and iteration % checkpoint_every == 0:
                actorrt.checkpoint(group, timeout=timeout)
                _check(seen)  # a checkpoint of actors rolled back meanwhile is not this iteration's
                checkpointed = iteration
            refs = [w.iterate.remote(iteration) for w in group]
            if on_iteration is not None:
                on_iteration(iteration)
            actorrt.get(refs, timeout=timeout)
            _check(seen)  # tasks sent after a rollback ran on restored actors, without an error
        except actorrt.RolledBackError:
            iteration, seen = checkpointed, actorrt.rollbacks()
            continue
        iteration += 1
    return actorrt.get([w.result.remote() for w in group], timeout=timeout)


def _check(seen: int) -> None:
    if actorrt.rollbacks() != seen:
        raise actorrt.RolledBackError("the cluster rolled back to its last global checkpoint")


def reference(workers: int, size: int, iterations: int, seed: int = 0) -> np.ndarray:
    """The same computation in plain numpy, summing in rank order (an independent oracle)."""
    data = [np.random.default_rng(seed + r).standard_normal(size) for r in range(workers)]
    for _ in range(iterations):
        total = data[0]
        for other in data[1:]:
            total = total + other
        data = [total / workers] * workers
    return data[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--kill", action="store_true", help="SIGKILL node 1 during the middle iteration")
    parser.add_argument("--ft", default="lineage_stash", help="lineage_stash, write_first, checkpoint or none")
    parser.add_argument("--checkpoint-every", type=int, default=None, help="iterations between checkpoints")
    args = parser.parse_args()
    actorrt.init(num_nodes=2, ft=args.ft)
    group = create_group(args.workers, args.size)
    pending_kill = [args.iterations // 2] if args.kill else []

    def kill_once(iteration: int) -> None:
        if pending_kill and iteration == pending_kill[0]:
            pending_kill.clear()
            actorrt.kill_node(1)

    started = time.perf_counter()
    results = run(group, args.iterations, kill_once, args.checkpoint_every)
    elapsed = time.perf_counter() - started
    expected = reference(args.workers, args.size, args.iterations)
    identical = all(r.tobytes() == expected.tobytes() for r in results)
    print(f"{args.iterations} iterations in {elapsed:.2f} s; bit-identical to plain numpy: {identical}")
    for node in actorrt.stats()["nodes"]:
        for recovery in node["recoveries"]:
            shown = {k: round(v, 1) if isinstance(v, float) else v for k, v in recovery.items()}
            print(f"node {node['node']} recovered:", shown)
    actorrt.shutdown()


if __name__ == "__main__":
    main()
