"""Recovery of an iterative allreduce (paper Fig. 12b): lineage stash replay against the
global-rollback baseline.

The group of ``examples/allreduce.py`` (P workers on 2 nodes, each iteration an
``actorrt.collective.allreduce`` of numpy arrays, a global checkpoint every C iterations) runs I
iterations twice per mode: once without failures, once with node 1 SIGKILLed during iteration K.
For each mode it reports the failure-free time, the time with the failure, and what the failure
cost: the time from the start of iteration K to the end, with the failure minus without (the
iterations before K are the same work in both runs, and leaving them out keeps their noise out of
the difference), with each iteration's duration for the plot.

- ``lineage_stash``: only node 1 restarts; its workers restore their checkpoint and replay their
  logged tasks after it, fetching the results of their collective calls from the survivors; the
  survivors never roll back and the iteration goes on.
- ``global_rollback``: every node restarts and every worker goes back to the last global checkpoint;
  the driver redoes the iterations since.
- ``write_first``: like ``lineage_stash``, with every task logged before it runs.
- ``none``: no logging and no recovery: the failure-free reference (it runs no failure).

Per mode it also reports what the lineage store took per task (bytes written / tasks the workers
ran) and what the processes kept for replays (pinned and spilled argument bytes).

Each run has a fresh cluster of its own (the failure-free run does not inherit what a recovery left
behind); all of them run in one sitting, so the ratios between modes are measured on the same
(shared, noisy) machine.

Run: ``python bench/allreduce_recovery.py [--workers 4] [--size 200000] [--iterations 30]
[--checkpoint-every 10] [--kill-at 25] [--ft lineage_stash,global_rollback]``.
"""

from __future__ import annotations

import datetime as _dt
import importlib.util
import json
import os
import platform
from pathlib import Path
from typing import Any

import click
from recovery_runs import from_iteration, mean_latencies, plot_failures, timed

import actorrt

# The targets: what a failure costs under lineage stash against a global rollback, and the
# failure-free time of lineage stash against no logging at all (ratios measured in one run).
TARGET_COST_RATIO = 0.25
TARGET_OVERHEAD_RATIO = 1.1

_spec = importlib.util.spec_from_file_location(
    "allreduce", Path(__file__).resolve().parents[1] / "examples" / "allreduce.py")
allreduce = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(allreduce)


def _timed_run(workers: int, size: int, iterations: int, every: int, kill_at: int | None) -> dict[str, Any]:
    """One run on a fresh group (see ``recovery_runs.timed``)."""
    group = allreduce.create_group(workers, size, nodes=2)
    return timed(lambda on_iteration: allreduce.run(group, iterations, on_iteration, every),
                 allreduce.reference(workers, size, iterations), kill_at)


def _store_and_kept(stats: dict[str, Any]) -> dict[str, Any]:
    """What the lineage store took per task the workers ran, and what the processes keep for replays."""
    processes = [*stats["nodes"], stats["driver"]]
    written = sum(p.get("lineage", {}).get("store_bytes_written", 0) for p in processes)
    tasks = sum(a["executed"] for n in stats["nodes"] for a in n["actors"] if a["class"] == "Worker")
    kept = [p.get("objects_kept", {}) for p in processes]
    return {"store_bytes_written": written, "worker_tasks": tasks, "store_bytes_per_task": written / max(tasks, 1),
            "pinned_bytes": sum(k.get("pinned_bytes", 0) for k in kept),
            "spilled_bytes": sum(k.get("spilled_bytes", 0) for k in kept)}


def _minus(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """What the failure-free run added to the counters (kept bytes: what is kept after it)."""
    written = after["store_bytes_written"] - before["store_bytes_written"]
    tasks = after["worker_tasks"] - before["worker_tasks"]
    return {**after, "store_bytes_written": written, "worker_tasks": tasks,
            "store_bytes_per_task": written / max(tasks, 1)}


@click.command()
@click.option("--workers", default=4, show_default=True, help="allreduce workers (worker r on node r % 2)")
@click.option("--size", default=200_000, show_default=True, help="float64 elements per worker")
@click.option("--iterations", default=30, show_default=True)
@click.option("--checkpoint-every", default=10, show_default=True, help="iterations between global checkpoints")
@click.option("--kill-at", default=None, type=int, help="iteration during which node 1 is killed "
              "[default: the last one before a checkpoint, so a rollback loses the most]")
@click.option("--ft", "modes_text", default="lineage_stash,global_rollback,none", show_default=True,
              help="modes to compare: lineage_stash, write_first, global_rollback, none (failure-free only)")
@click.option("--out", "out_dir", default="bench/results", show_default=True, type=click.Path(file_okay=False))
def main(workers: int, size: int, iterations: int, checkpoint_every: int, kill_at: int | None,
         modes_text: str, out_dir: str) -> None:
    """Time an iterative allreduce with and without a node failure, per fault-tolerance mode."""
    modes = [m.strip() for m in modes_text.split(",") if m.strip()]
    kill_at = kill_at if kill_at is not None else min(iterations - 1, 2 * checkpoint_every - 1)
    if not 0 <= kill_at < iterations or workers < 2 or checkpoint_every < 1:
        raise click.BadParameter("need 0 <= --kill-at < --iterations, --workers >= 2, --checkpoint-every >= 1")
    results = []
    for ft in modes:
        failed, recoveries = None, []
        if ft != "none":
            actorrt.init(num_nodes=2, ft=ft)
            try:
                failed = _timed_run(workers, size, iterations, checkpoint_every, kill_at)
                recoveries = [r for n in actorrt.stats()["nodes"] for r in n["recoveries"]]
            finally:
                actorrt.shutdown()
        actorrt.init(num_nodes=2, ft=ft)
        try:
            before = _store_and_kept(actorrt.stats())
            clean = _timed_run(workers, size, iterations, checkpoint_every, None)
            clean.update(_minus(_store_and_kept(actorrt.stats()), before))
        finally:
            actorrt.shutdown()
        results.append({"ft": ft, "failure_free": clean, "with_failure": failed, "recoveries": recoveries,
                        "latency": mean_latencies(clean, failed, kill_at),
                        "cost_s": (from_iteration(failed, kill_at) - from_iteration(clean, kill_at)
                                   if failed else None),
                        "total_difference_s": failed["total_s"] - clean["total_s"] if failed else None,
                        "redone": len(failed["starts"]) - iterations if failed else None})
        click.echo(f"{ft}: {clean['total_s']:.2f} s without a failure"
                   + (f", {failed['total_s']:.2f} s with one" if failed else ""), err=True)

    click.echo(f"iterative allreduce: {workers} workers x {size} float64, {iterations} iterations, checkpoint every "
               f"{checkpoint_every}, node 1 killed in iteration {kill_at}; {os.cpu_count()} cores")
    click.echo(f"{'ft':<15}{'no failure s':>14}{'failure s':>11}{'cost s':>9}{'redone':>8}{'bit-identical':>15}"
               f"{'store B/task':>14}{'kept MB':>9}{'spilled MB':>12}")
    for r in results:
        clean, failed = r["failure_free"], r["with_failure"]
        failure = (f"{failed['total_s']:>11.2f}{r['cost_s']:>9.2f}{r['redone']:>8}" if failed
                   else f"{'-':>11}{'-':>9}{'-':>8}")
        click.echo(f"{r['ft']:<15}{clean['total_s']:>14.2f}" + failure
                   + f"{str((failed or clean)['bit_identical']):>15}{clean['store_bytes_per_task']:>14.0f}"
                   f"{clean['pinned_bytes'] / 1e6:>9.1f}{clean['spilled_bytes'] / 1e6:>12.1f}")
    by_mode = {r["ft"]: r for r in results}
    ratios = {}
    if "lineage_stash" in by_mode and "global_rollback" in by_mode and by_mode["global_rollback"]["cost_s"] > 0:
        ratios["failure_cost_ls_over_rollback"] = (by_mode["lineage_stash"]["cost_s"]
                                                   / by_mode["global_rollback"]["cost_s"])
        click.echo(f"failure cost, lineage stash / global rollback: {ratios['failure_cost_ls_over_rollback']:.2f}x "
                   f"(target <= {TARGET_COST_RATIO}x)")
    if "lineage_stash" in by_mode and "none" in by_mode:
        ratios["failure_free_ls_over_none"] = (by_mode["lineage_stash"]["failure_free"]["total_s"]
                                               / by_mode["none"]["failure_free"]["total_s"])
        click.echo(f"failure-free time, lineage stash / none: {ratios['failure_free_ls_over_none']:.2f}x "
                   f"(target <= {TARGET_OVERHEAD_RATIO}x)")

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    meta = {"workers": workers, "size": size, "iterations": iterations, "checkpoint_every": checkpoint_every,
            "kill_at": kill_at, "cpus": os.cpu_count(), "python": platform.python_version(), "time": stamp}
    doc = {"meta": meta, "results": results, "ratios": ratios}
    (out / f"allreduce-recovery-{stamp}.json").write_text(json.dumps(doc, indent=1))
    failures = [r for r in results if r["with_failure"]]
    if failures:
        plot_failures(failures, kill_at, "Iterative allreduce with a node failure: replay vs global rollback",
                      out / f"allreduce-recovery-{stamp}.png")
    click.echo(f"wrote {out}/allreduce-recovery-{stamp}.json and .png")


if __name__ == "__main__":
    main()
