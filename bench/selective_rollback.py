"""Selective rollback: a training loop whose workers each take their iterations from the driver.

P workers on 2 nodes each hold a shard of a seeded least-squares problem. Each iteration the
driver sends the weights to every worker, sums their gradients in rank order and steps. The
driver takes a global checkpoint of the workers every C iterations; node 1 is SIGKILLed once
iteration K is under way. Per mode, on fresh clusters, a run with the failure and one without:
the failure's cost is the time from iteration K's start to the end, with minus without.

- ``checkpoint``: the rollback frontier with selective re-execution. The workers are
  deterministic (``nondeterministic=False``) and only the driver calls them, so node 1's workers
  are restored from the checkpoint and do again the iterations the driver sends them again; the
  driver and node 0's workers go on without a rollback.
- ``global_rollback``: the baseline: every node goes back to the checkpoint, and the driver
  resumes from that iteration with the weights it had then.
- ``lineage_stash``: the default: node 1's workers checkpoint every C iterations on their own
  and replay their logged calls since.
- ``none``: nothing kept, nothing recovered: a run without the failure only, for scale.

Every run's weights are checked bit for bit against plain numpy in this process. Each worker
also counts the gradients it computed in a file outside its state (a rollback does not take
it back): the work done again is their sum past P x iterations.

Run: ``python bench/selective_rollback.py [--workers 4] [--iterations 100] [--checkpoint-every 25]
[--kill-at 45] [--rows 200000]``. Writes ``bench/results/selective-rollback-<time>.json`` and
``.png`` and prints a table.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import click
import numpy as np
from recovery_runs import from_iteration, plot_failures, timed
from run_meta import run_meta

import actorrt

RESULTS = Path(__file__).parent / "results"
FEATURES, LR = 64, 0.05
MODES = ("checkpoint", "global_rollback", "lineage_stash")


class Shard:
    """One worker's rows of the problem; ``gradient`` is one iteration's work."""

    def __init__(self, rank: int, workers: int, rows: int, tally: str = "") -> None:
        self.args = (rank, workers, rows, tally)
        truth = np.random.default_rng(11).standard_normal(FEATURES)
        rng = np.random.default_rng([11, rank])  # its own rows only: a restore makes them again quickly
        self.x = rng.standard_normal((rows // workers, FEATURES))
        self.y = self.x @ truth + 0.1 * rng.standard_normal(rows // workers)
        self.tally = tally  # a file that counts the gradients computed, outside the actor's state

    def checkpoint(self) -> tuple[int, int, int, str]:
        return self.args  # the shard is made again from its seed: checkpoints stay small

    def restore(self, args: tuple[int, int, int, str]) -> None:
        self.__init__(*args)

    def gradient(self, weights: np.ndarray) -> np.ndarray:
        if self.tally:
            with open(self.tally, "ab") as f:
                f.write(b".")
        return self.x.T @ (self.x @ weights - self.y) / len(self.y)


Worker = actorrt.remote(Shard)


def reference(workers: int, rows: int, iterations: int) -> np.ndarray:
    shards = [Shard(r, workers, rows) for r in range(workers)]
    weights = np.zeros(FEATURES)
    for _ in range(iterations):
        weights = weights - LR * sum(s.gradient(weights) for s in shards)
    return weights


def train(workers: list, iterations: int, every: int, global_checkpoints: bool, on_iteration: Any) -> np.ndarray:
    """The driver's loop; with ``global_checkpoints``, a checkpoint of every worker every ``every``
    iterations, and after a rollback of every node, from the last of them again."""
    weights, saved, i, seen = np.zeros(FEATURES), (0, np.zeros(FEATURES)), 0, actorrt.rollbacks()
    while i < iterations:
        try:
            if global_checkpoints and i % every == 0:
                actorrt.checkpoint(workers, timeout=60)
                if actorrt.rollbacks() != seen:
                    raise actorrt.RolledBackError("rolled back during the checkpoint")
                saved = (i, weights.copy())
            on_iteration(i)
            gradients = actorrt.get([w.gradient.remote(weights) for w in workers], timeout=120)
            if actorrt.rollbacks() != seen:
                raise actorrt.RolledBackError("rolled back during the iteration")
        except actorrt.RolledBackError:
            (i, weights), seen = (saved[0], saved[1].copy()), actorrt.rollbacks()
            continue
        weights = weights - LR * sum(gradients)
        i += 1
    return weights


def run(mode: str, workers: int, rows: int, iterations: int, every: int, kill_at: int | None,
        expected: np.ndarray) -> dict[str, Any]:
    tallies = Path(tempfile.mkdtemp(prefix="selective-"))
    actorrt.init(num_nodes=2, ft=mode, checkpoint_dir=str(tallies / "ckpt"))
    try:
        options = {"nondeterministic": False} if mode == "checkpoint" else {}
        if mode == "lineage_stash":
            options["checkpoint_every"] = every
        handles = [Worker.options(node=r % 2, **options).remote(r, workers, rows, str(tallies / f"{r}.tally"))
                   for r in range(workers)]
        actorrt.get([h.gradient.remote(np.zeros(FEATURES)) for h in handles])  # loaded (not counted below)
        for r in range(workers):
            (tallies / f"{r}.tally").write_bytes(b"")
        rolls_back = mode in ("checkpoint", "global_rollback")
        result = timed(lambda on_iteration: [train(handles, iterations, every, rolls_back,
                                                   on_iteration)], expected, kill_at)
        result["rollbacks"] = actorrt.rollbacks()
    finally:
        actorrt.shutdown()
    result["gradients"] = sum(os.path.getsize(tallies / f"{r}.tally") for r in range(workers))
    return result


@click.command()
@click.option("--workers", default=4, show_default=True)
@click.option("--iterations", default=100, show_default=True)
@click.option("--checkpoint-every", "every", default=25, show_default=True)
@click.option("--kill-at", default=45, show_default=True, help="the iteration node 1 is killed in")
@click.option("--rows", default=200_000, show_default=True, help="rows of the problem, over all workers")
def main(workers: int, iterations: int, every: int, kill_at: int, rows: int) -> None:
    stamp, meta = run_meta(workers=workers, iterations=iterations, every=every, kill_at=kill_at, rows=rows)
    expected = reference(workers, rows, iterations)
    results = []
    for mode in MODES:
        without = run(mode, workers, rows, iterations, every, None, expected)
        with_failure = run(mode, workers, rows, iterations, every, kill_at, expected)
        results.append({"ft": mode, "without_failure": without, "with_failure": with_failure,
                        "cost_s": from_iteration(with_failure, kill_at) - from_iteration(without, kill_at),
                        "redone": with_failure["gradients"] - workers * iterations,
                        "exact": without["bit_identical"] and with_failure["bit_identical"]})
    plain = run("none", workers, rows, iterations, every, None, expected)
    by = {r["ft"]: r for r in results}
    doc = {**meta, "results": results, "none": plain,
           "cost_checkpoint_over_global_rollback": by["checkpoint"]["cost_s"] / by["global_rollback"]["cost_s"]}
    RESULTS.mkdir(exist_ok=True)
    base = RESULTS / f"selective-rollback-{stamp}"
    base.with_suffix(".json").write_text(json.dumps(doc, indent=1))
    plot_failures(results, kill_at, f"Training loop, node 1 killed in iteration {kill_at} (checkpoint every {every}; "
                  f"commit {meta['commit']})", base.with_suffix(".png"))
    print(f"selective rollback: {workers} workers, {iterations} iterations, checkpoint every {every}, "
          f"node 1 killed in iteration {kill_at} ({stamp}, commit {meta['commit']}): {base}.json")
    print(f"  {'ft':<16} {'free s':>7} {'failed s':>9} {'cost s':>7} {'gradients redone':>17} {'rollbacks':>9} exact")
    for r in results:
        print(f"  {r['ft']:<16} {r['without_failure']['total_s']:>7.2f} {r['with_failure']['total_s']:>9.2f} "
              f"{r['cost_s']:>7.2f} {r['redone']:>17} {r['with_failure']['rollbacks']:>9} {r['exact']}")
    print(f"  {'none':<16} {plain['total_s']:>7.2f} {'-':>9} {'-':>7} {'-':>17} {'-':>9} {plain['bit_identical']}")
    ratio = doc["cost_checkpoint_over_global_rollback"]
    print(f"  failure cost, checkpoint (selective) / global rollback: {ratio:.2f}x")


if __name__ == "__main__":
    main()
