"""Ring allreduce over numpy arrays with actors: each iteration averages the workers' arrays.

Every worker splits its array into one chunk per worker; chunks travel the ring as fire-and-forget
tasks (reduce-scatter, then all-gather), so each chunk is summed in one fixed order and the result
is the same bit for bit on every run, with or without failures (a replay repeats it exactly).

    python examples/ring_allreduce.py [--workers 4] [--size 100000] [--iterations 10] [--kill]
        [--ft checkpoint --checkpoint-every 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import actorrt


@actorrt.remote
class AllreduceWorker:
    def __init__(self, rank: int, workers: int, size: int, seed: int = 0):
        self.rank, self.n = rank, workers
        self.data = np.random.default_rng(seed + rank).standard_normal(size)
        self.bounds = np.linspace(0, size, workers + 1).astype(int)
        self.next = None
        self.buffers: dict[int, np.ndarray] = {}
        self.received: dict[int, int] = {}
        self.finished = -1

    def connect(self, ring: list) -> None:
        self.next = ring[(self.rank + 1) % self.n]

    def _chunk(self, c: int) -> slice:
        return slice(self.bounds[c], self.bounds[c + 1])

    def _buffer(self, iteration: int) -> np.ndarray:
        # A neighbour's first chunk may arrive before the driver's start(); both begin from the
        # array the previous iteration left (the driver starts an iteration once all finished it).
        if iteration not in self.buffers:
            self.buffers[iteration] = self.data.copy()
        return self.buffers[iteration]

    def start(self, iteration: int) -> None:
        buf = self._buffer(iteration)
        self.next.receive.remote(iteration, 0, self.rank, buf[self._chunk(self.rank)])

    def receive(self, iteration: int, step: int, c: int, chunk: np.ndarray) -> None:
        buf = self._buffer(iteration)
        if step < self.n - 1:  # reduce-scatter: add ours to the running sum and pass it on
            buf[self._chunk(c)] += chunk
        else:  # all-gather: take the finished sum
            buf[self._chunk(c)] = chunk
        if step + 1 < 2 * (self.n - 1):
            self.next.receive.remote(iteration, step + 1, c, buf[self._chunk(c)])
        self.received[iteration] = self.received.get(iteration, 0) + 1
        if self.received[iteration] == 2 * (self.n - 1):
            self.data = self.buffers.pop(iteration) / self.n
            self.finished = iteration

    def result(self, iteration: int) -> np.ndarray | None:
        """The array after ``iteration``, or None while it is still running here."""
        return self.data if self.finished >= iteration else None


def create_ring(workers: int, size: int, nodes: int, seed: int = 0) -> list:
    ring = [AllreduceWorker.options(node=r % nodes).remote(r, workers, size, seed) for r in range(workers)]
    for w in ring:
        w.connect.remote(ring)
    return ring


def run(ring: list, iterations: int, on_iteration=None, checkpoint_every: int | None = None,
        timeout: float = 120.0) -> list[np.ndarray]:
    """Run ``iterations`` allreduce iterations; returns every worker's final array.

    ``on_iteration(i)`` is called once iteration ``i`` is under way (to inject failures). With
    ``checkpoint_every``, the ring is checkpointed before the first iteration and every that many
    iterations; under ``ft="checkpoint"`` a failure rolls the ring back to the last of them, and
    the run goes on from the iteration that checkpoint followed.
    """
    checkpointed = 0  # the iteration the last checkpoint was taken before
    iteration = 0
    while iteration < iterations:
        try:
            if checkpoint_every and iteration % checkpoint_every == 0:
                actorrt.checkpoint(ring, timeout=timeout)  # after a rollback to here: the same state again
                checkpointed = iteration
            results = _iterate(ring, iteration, on_iteration, timeout)
        except actorrt.RolledBackError:
            iteration = checkpointed
            continue
        iteration += 1
    return results


def _iterate(ring: list, iteration: int, on_iteration, timeout: float) -> list[np.ndarray]:
    rollbacks = actorrt.rollbacks()
    for w in ring:
        w.start.remote(iteration)
    if on_iteration is not None:
        on_iteration(iteration)
    deadline = time.monotonic() + timeout
    pause = 0.001  # polls back off: each one is a task the cluster logs, and must not swamp the ring
    while True:
        results = actorrt.get([w.result.remote(iteration) for w in ring])
        if actorrt.rollbacks() != rollbacks:  # ft="checkpoint": the ring went back meanwhile
            raise actorrt.RolledBackError(f"iteration {iteration} was rolled back")
        if all(r is not None for r in results):
            return results
        if time.monotonic() > deadline:
            state = [(n["node"], [(a["class"], a["queued"], a["executed"]) for a in n["actors"]],
                      n["lineage"]["stash_size"]) for n in actorrt.stats()["nodes"]]
            raise TimeoutError(f"iteration {iteration} did not finish within {timeout} s; nodes (actors: queued, "
                               f"executed; stash size): {state}")
        time.sleep(pause)
        pause = min(2 * pause, 0.02)


def reference(workers: int, size: int, iterations: int, seed: int = 0) -> np.ndarray:
    """The same computation in plain numpy, in the ring's summation order (an independent oracle)."""
    data = [np.random.default_rng(seed + r).standard_normal(size) for r in range(workers)]
    bounds = np.linspace(0, size, workers + 1).astype(int)
    for _ in range(iterations):
        out = np.empty(size)
        for c in range(workers):
            part = slice(bounds[c], bounds[c + 1])
            acc = data[c][part].copy()  # chunk c starts at worker c and gains one worker per hop
            for k in range(1, workers):
                acc = data[(c + k) % workers][part] + acc
            out[part] = acc
        data = [out / workers for _ in range(workers)]
    return data[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--kill", action="store_true", help="SIGKILL node 1 during the middle iteration")
    parser.add_argument("--ft", default="lineage_stash", help="lineage_stash, write_first or checkpoint")
    parser.add_argument("--checkpoint-every", type=int, default=None, help="iterations between global checkpoints")
    args = parser.parse_args()
    actorrt.init(num_nodes=2, ft=args.ft)
    ring = create_ring(args.workers, args.size, nodes=2)
    pending_kill = [args.iterations // 2] if args.kill else []

    def kill_once(iteration: int) -> None:
        if pending_kill and iteration == pending_kill[0]:
            pending_kill.clear()
            actorrt.kill_node(1)

    started = time.perf_counter()
    results = run(ring, args.iterations, kill_once, args.checkpoint_every)
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
