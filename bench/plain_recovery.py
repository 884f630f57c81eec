"""What a node failure costs plain actors: an allreduce written by hand, replay against global rollback.

P workers on 2 nodes average their arrays each iteration with a ring written on plain actors: each
worker splits its array into P chunks that travel the ring as fire-and-forget tasks (reduce-scatter
then all-gather, every chunk summed in one fixed order). The driver starts an iteration on every
worker, then polls each worker's ``result`` (a logged task each; the workers are nondeterministic
actors, whose order of arrivals is recorded) until all are done. A global checkpoint is taken
before iteration 0 only; node 1 is SIGKILLed in iteration K. Per mode, on fresh clusters, a run
with the failure and one without: the failure's cost is the time from iteration K's start to the
end, with minus without. The lineage stash replays node 1's workers (their tasks since the
checkpoint) while node 0's keep theirs; the global rollback restarts both nodes from the
checkpoint and redoes K + 1 iterations. Every run's arrays are checked bit for bit against plain
numpy in the ring's order. The replay's rate (``actorrt.stats()``) is compared with the first
execution's: node 1's tasks over the failure-free run's time.

Writes ``bench/results/plain-recovery-<time>.json`` and ``.png`` and prints a table with the
targets (failure cost ≤ 0.25x rollback's; replay ≥ 4x the first execution's rate).

Run: ``python bench/plain_recovery.py [--size 125000] [--iterations 100] [--kill-at 90]``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import click
import numpy as np
from recovery_runs import from_iteration, plot_failures, timed
from rich.progress import Progress
from run_meta import run_meta

import actorrt

TARGET_COST_RATIO = 0.25
TARGET_REPLAY_RATIO = 4.0
RESULTS = Path(__file__).parent / "results"


@actorrt.remote
class RingWorker:
    def __init__(self, rank: int, workers: int, size: int) -> None:
        self.rank, self.n = rank, workers
        self.data = np.random.default_rng(rank).standard_normal(size)
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
        if iteration not in self.buffers:  # a neighbour's chunk may come before the driver's start
            self.buffers[iteration] = self.data.copy()
        return self.buffers[iteration]

    def start(self, iteration: int) -> None:
        self.next.receive.remote(iteration, 0, self.rank, self._buffer(iteration)[self._chunk(self.rank)])

    def receive(self, iteration: int, step: int, c: int, chunk: np.ndarray) -> None:
        buf = self._buffer(iteration)
        if step < self.n - 1:
            buf[self._chunk(c)] += chunk
        else:
            buf[self._chunk(c)] = chunk
        if step + 1 < 2 * (self.n - 1):
            self.next.receive.remote(iteration, step + 1, c, buf[self._chunk(c)])
        self.received[iteration] = self.received.get(iteration, 0) + 1
        if self.received[iteration] == 2 * (self.n - 1):
            self.data = self.buffers.pop(iteration) / self.n
            self.finished = iteration

    def result(self, iteration: int) -> np.ndarray | None:
        return self.data if self.finished >= iteration else None


def reference(workers: int, size: int, iterations: int) -> np.ndarray:
    """The same averages in plain numpy, in the ring's order of summation."""
    data = [np.random.default_rng(r).standard_normal(size) for r in range(workers)]
    bounds = np.linspace(0, size, workers + 1).astype(int)
    for _ in range(iterations):
        out = np.empty(size)
        for c in range(workers):
            part = slice(bounds[c], bounds[c + 1])
            acc = data[c][part].copy()
            for k in range(1, workers):
                acc = data[(c + k) % workers][part] + acc
            out[part] = acc
        data = [out / workers for _ in range(workers)]
    return data[0]


def train(ring: list, iterations: int, on_iteration: Any) -> list[np.ndarray]:
    """Iterations with a global checkpoint before the first; after a rollback, from there again."""
    iteration, results = 0, []
    while iteration < iterations:
        try:
            if iteration == 0:
                actorrt.checkpoint(ring, timeout=120)
            results = _iterate(ring, iteration, on_iteration)
        except actorrt.RolledBackError:
            iteration = 0
            continue
        iteration += 1
    return results


def _iterate(ring: list, iteration: int, on_iteration: Any) -> list[np.ndarray]:
    rollbacks = actorrt.rollbacks()
    for w in ring:
        w.start.remote(iteration)
    on_iteration(iteration)
    pause, deadline = 0.001, time.monotonic() + 120
    while True:
        results = actorrt.get([w.result.remote(iteration) for w in ring], timeout=120)
        if actorrt.rollbacks() != rollbacks:
            raise actorrt.RolledBackError(f"iteration {iteration} was rolled back")
        if all(r is not None for r in results):
            return results
        if time.monotonic() > deadline:
            raise TimeoutError(f"iteration {iteration} did not finish in 120 s")
        time.sleep(pause)
        pause = min(2 * pause, 0.02)  # polls back off: each is a logged task


def run_mode(ft: str, workers: int, size: int, iterations: int, kill_at: int) -> dict[str, Any]:
    expected = reference(workers, size, iterations)
    out: dict[str, Any] = {"ft": ft}
    for failing in (False, True):
        actorrt.init(num_nodes=2, ft=ft)
        try:
            ring = [RingWorker.options(node=r % 2).remote(r, workers, size) for r in range(workers)]
            actorrt.get([w.connect.remote(ring) for w in ring], timeout=60)
            run = timed(lambda on_iteration, ring=ring: train(ring, iterations, on_iteration), expected,
                        kill_at if failing else None)
            nodes = actorrt.stats()["nodes"]
            node1 = next(n for n in nodes if n["node"] == 1)
            if failing:
                deadline = time.monotonic() + 60
                while ft == "lineage_stash" and not any(r.get("replay_ms", 0) > 0 for r in node1["recoveries"]):
                    assert time.monotonic() < deadline, "node 1 did not finish its replay"
                    time.sleep(0.05)
                    node1 = next(n for n in actorrt.stats()["nodes"] if n["node"] == 1)
                out["recoveries"] = node1["recoveries"]
            else:
                out["node1_tasks"] = sum(a["executed"] for a in node1["actors"])
        finally:
            actorrt.shutdown()
        out["with_failure" if failing else "failure_free"] = run
    out["cost_s"] = from_iteration(out["with_failure"], kill_at) - from_iteration(out["failure_free"], kill_at)
    out["first_tasks_per_s"] = out["node1_tasks"] / out["failure_free"]["total_s"]
    replays = [r for r in out.get("recoveries", []) if r.get("replay_tasks_per_s")]
    out["replay_tasks_per_s"] = replays[-1]["replay_tasks_per_s"] if replays else 0.0
    return out


@click.command()
@click.option("--workers", default=4, show_default=True)
@click.option("--size", default=125_000, show_default=True, help="float64 per worker (125,000 = 1 MB)")
@click.option("--iterations", default=100, show_default=True)
@click.option("--kill-at", default=90, show_default=True, help="iteration in which node 1 is killed")
@click.option("--ft", "modes_text", default="lineage_stash,global_rollback", show_default=True)
def main(workers: int, size: int, iterations: int, kill_at: int, modes_text: str) -> None:
    """The failure cost of a hand-written allreduce on plain actors, replay against rollback."""
    modes = [m.strip() for m in modes_text.split(",") if m.strip()]
    results = []
    with Progress(transient=True) as progress:
        task = progress.add_task("plain recovery", total=len(modes))
        for ft in modes:
            results.append(run_mode(ft, workers, size, iterations, kill_at))
            progress.advance(task)
    click.echo(f"plain-actor allreduce: {workers} workers x {size} float64, {iterations} iterations, checkpoint "
               f"before iteration 0, node 1 killed in iteration {kill_at}; {os.cpu_count()} cores")
    click.echo(f"{'ft':<15}{'no failure s':>13}{'failure s':>11}{'cost s':>9}{'first /s':>10}{'replay /s':>11}"
               f"{'bit-identical':>15}")
    for r in results:
        identical = r["failure_free"]["bit_identical"] and r["with_failure"]["bit_identical"]
        click.echo(f"{r['ft']:<15}{r['failure_free']['total_s']:>13.2f}{r['with_failure']['total_s']:>11.2f}"
                   f"{r['cost_s']:>9.2f}{r['first_tasks_per_s']:>10.0f}{r['replay_tasks_per_s']:>11.0f}"
                   f"{str(identical):>15}")
    by_mode = {r["ft"]: r for r in results}
    ratios = {}
    if {"lineage_stash", "global_rollback"} <= by_mode.keys() and by_mode["global_rollback"]["cost_s"] > 0:
        ratio = by_mode["lineage_stash"]["cost_s"] / by_mode["global_rollback"]["cost_s"]
        ratios["cost_ls_over_rollback"] = ratio
        click.echo(f"failure cost, lineage stash / global rollback: {ratio:.2f}x (target <= {TARGET_COST_RATIO}x)")
    if "lineage_stash" in by_mode and by_mode["lineage_stash"]["first_tasks_per_s"]:
        ls = by_mode["lineage_stash"]
        ratio = ratios["replay_over_first"] = ls["replay_tasks_per_s"] / ls["first_tasks_per_s"]
        click.echo(f"replay / first execution, tasks per second: {ratio:.2f}x (target >= {TARGET_REPLAY_RATIO}x)")
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp, meta = run_meta(workers=workers, size=size, iterations=iterations, kill_at=kill_at)
    (RESULTS / f"plain-recovery-{stamp}.json").write_text(json.dumps({"meta": meta, "results": results,
                                                                      "ratios": ratios}, indent=1))
    plot_failures(results, kill_at, "Allreduce on plain actors with a node failure",
                  RESULTS / f"plain-recovery-{stamp}.png")
    click.echo(f"wrote {RESULTS}/plain-recovery-{stamp}.json and .png")
    if not all(r["failure_free"]["bit_identical"] and r["with_failure"]["bit_identical"] for r in results):
        raise SystemExit("a run's arrays differ from plain numpy")


if __name__ == "__main__":
    main()
