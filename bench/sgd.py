"""Distributed SGD with a node failure (paper Fig. 12c): iteration time, and what a failure costs,
under the lineage stash, the global-rollback baseline and no logging, in one run.

The trainers of ``examples/sgd.py`` (P workers on 2 nodes, an MLP, gradients summed with
``actorrt.collective.allreduce``) train for I iterations per mode, each run on a fresh cluster:
once without failures, once with node 1 SIGKILLed in iteration K (by default the last one before a
checkpoint, the worst case for a rollback). The lineage stash's trainers checkpoint themselves
every C iterations; the baseline's driver takes a global checkpoint every C iterations and, after
the rollback, redoes the iterations since. ``none`` runs only the failure-free run. Every run's
final weights are checked against a single-process numpy run over the same shards, bit for bit.

Writes ``bench/results/sgd-<time>.json`` and ``.png`` (iteration durations around the failure) and
prints a table with the targets; the mean latencies feed ``bench/table2.py``.

Run: ``python bench/sgd.py [--model mlp:256] [--iterations 60] [--checkpoint-every 20] [--quick]``.
"""

# ruff: noqa: E402 - the imports follow the BLAS thread counts below
from __future__ import annotations

import os

# One BLAS thread, as in the workers, before numpy loads: the single-process reference's matrix
# products must sum in the workers' order for the bit-for-bit check (see examples/sgd.py).
for _threads in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")

import importlib.util
import json
from pathlib import Path
from typing import Any

import click
from recovery_runs import from_iteration, mean_latencies, plot_failures, timed
from rich.progress import Progress
from run_meta import run_meta

import actorrt

TARGET_OVERHEAD_RATIO = 1.05  # failure-free iteration time, lineage stash / none
TARGET_COST_RATIO = 0.3  # failure cost, lineage stash / global rollback
RESULTS = Path(__file__).parent / "results"

_spec = importlib.util.spec_from_file_location("sgd", Path(__file__).resolve().parents[1] / "examples" / "sgd.py")
sgd = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sgd)


def _timed_run(ft: str, model: str, workers: int, iterations: int, every: int, lr: float,
               kill_at: int | None) -> dict[str, Any]:
    """One run on fresh trainers (see ``recovery_runs.timed``)."""
    rollback = ft == "global_rollback"
    trainers = sgd.create_trainers(model, workers, lr, None if rollback or ft == "none" else every)
    actorrt.get([t.weights.remote() for t in trainers], timeout=120)  # constructed
    return timed(lambda on_iteration: sgd.train(trainers, iterations, on_iteration, every if rollback else None),
                 sgd.reference(model, workers, iterations, lr), kill_at)


def _run_mode(ft: str, args: dict[str, Any], kill_at: int) -> dict[str, Any]:
    runs: dict[str, Any] = {"ft": ft, "with_failure": None, "recoveries": []}
    for failing in ([True, False] if ft != "none" else [False]):
        actorrt.init(num_nodes=2, ft=ft)
        try:
            run = _timed_run(ft, **args, kill_at=kill_at if failing else None)
            if failing:
                runs["with_failure"] = run
                runs["recoveries"] = [r for n in actorrt.stats()["nodes"] for r in n["recoveries"]]
            else:
                runs["failure_free"] = run
        finally:
            actorrt.shutdown()
    clean, failed = runs["failure_free"], runs["with_failure"]
    runs["iteration_ms"] = clean["total_s"] / args["iterations"] * 1e3
    runs["cost_s"] = from_iteration(failed, kill_at) - from_iteration(clean, kill_at) if failed else None
    runs["redone"] = len(failed["starts"]) - args["iterations"] if failed else None
    runs["latency"] = mean_latencies(clean, failed, kill_at)
    return runs


@click.command()
@click.option("--model", default="mlp:256", show_default=True, help="logreg, mlp or mlp:<hidden units>")
@click.option("--workers", default=4, show_default=True)
@click.option("--iterations", default=60, show_default=True)
@click.option("--checkpoint-every", default=20, show_default=True, help="iterations between checkpoints")
@click.option("--kill-at", default=None, type=int, help="iteration in which node 1 is killed "
              "[default: the last before a checkpoint]")
@click.option("--lr", default=0.5, show_default=True)
@click.option("--ft", "modes_text", default="lineage_stash,global_rollback,none", show_default=True)
@click.option("--quick", is_flag=True, help="30 iterations, checkpoint every 10")
def main(model: str, workers: int, iterations: int, checkpoint_every: int, kill_at: int | None, lr: float,
         modes_text: str, quick: bool) -> None:
    """Time distributed SGD with and without a node failure, per fault-tolerance mode."""
    if quick:
        iterations, checkpoint_every = 30, 10
    kill_at = kill_at if kill_at is not None else min(iterations - 1, 2 * checkpoint_every - 1)
    modes = [m.strip() for m in modes_text.split(",") if m.strip()]
    args = {"model": model, "workers": workers, "iterations": iterations, "every": checkpoint_every, "lr": lr}
    results = []
    with Progress(transient=True) as progress:
        task = progress.add_task("sgd", total=len(modes))
        for ft in modes:
            results.append(_run_mode(ft, args, kill_at))
            progress.advance(task)

    click.echo(f"distributed SGD: {model}, {workers} workers, {iterations} iterations, checkpoint every "
               f"{checkpoint_every}, node 1 killed in iteration {kill_at}; {os.cpu_count()} cores")
    click.echo(f"{'ft':<15}{'iteration ms':>13}{'no failure s':>14}{'failure s':>11}{'cost s':>9}{'redone':>8}"
               f"{'bit-identical':>15}{'hit iteration ms':>18}")
    for r in results:
        clean, failed, lat = r["failure_free"], r["with_failure"], r["latency"]
        failure = (f"{failed['total_s']:>11.2f}{r['cost_s']:>9.2f}{r['redone']:>8}" if failed
                   else f"{'-':>11}{'-':>9}{'-':>8}")
        hit = f"{lat['hit_iteration_ms']:>18.1f}" if "hit_iteration_ms" in lat else f"{'-':>18}"
        identical = clean["bit_identical"] and (failed is None or failed["bit_identical"])
        click.echo(f"{r['ft']:<15}{r['iteration_ms']:>13.2f}{clean['total_s']:>14.2f}" + failure
                   + f"{str(identical):>15}" + hit)
    by_mode = {r["ft"]: r for r in results}
    ratios = {}
    if {"lineage_stash", "none"} <= by_mode.keys():
        ratio = ratios["iteration_time_ls_over_none"] = (by_mode["lineage_stash"]["iteration_ms"]
                                                         / by_mode["none"]["iteration_ms"])
        click.echo(f"iteration time, lineage stash / none: {ratio:.2f}x (target <= {TARGET_OVERHEAD_RATIO}x)")
    if {"lineage_stash", "global_rollback"} <= by_mode.keys() and by_mode["global_rollback"]["cost_s"] > 0:
        ratio = ratios["failure_cost_ls_over_rollback"] = (by_mode["lineage_stash"]["cost_s"]
                                                           / by_mode["global_rollback"]["cost_s"])
        click.echo(f"failure cost, lineage stash / global rollback: {ratio:.2f}x (target <= {TARGET_COST_RATIO}x)")

    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp, meta = run_meta(**args, kill_at=kill_at)
    (RESULTS / f"sgd-{stamp}.json").write_text(json.dumps({"meta": meta, "results": results, "ratios": ratios},
                                                          indent=1))
    failures = [r for r in results if r["with_failure"]]
    if failures:
        plot_failures(failures, kill_at, f"Distributed SGD ({model}) with a node failure",
                      RESULTS / f"sgd-{stamp}.png")
    click.echo(f"wrote {RESULTS}/sgd-{stamp}.json and .png")


if __name__ == "__main__":
    main()
