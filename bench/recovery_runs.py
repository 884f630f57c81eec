"""What the recovery benchmarks share: timed runs of an iterative job, with a node killed in one
iteration, read as iteration durations, the failure's cost, and a plot.

A run records when each iteration started (a rolled-back iteration starts again) and when the run
ended. The failure's cost is the time from the start of the killed iteration to the end, with the
failure minus without: the iterations before it are the same work in both runs, and leaving them
out keeps their noise out of the difference.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import actorrt


def timed(run: Callable[[Callable[[int], None]], list[np.ndarray]], expected: np.ndarray,
          kill_at: int | None) -> dict[str, Any]:
    """Time ``run(on_iteration)``, SIGKILLing node 1 once iteration ``kill_at`` is under way;
    returns its total time, the starts of the iterations (a rolled back one starts again) and
    whether every array it returned is ``expected``, bit for bit."""
    starts: list[tuple[int, float]] = []
    pending_kill = [kill_at] if kill_at is not None else []

    def on_iteration(iteration: int) -> None:
        starts.append((iteration, time.perf_counter()))
        if pending_kill and iteration == pending_kill[0]:
            pending_kill.clear()
            actorrt.kill_node(1)

    began = time.perf_counter()
    results = run(on_iteration)
    ended = time.perf_counter()
    return {"total_s": ended - began, "starts": [(i, t - began) for i, t in starts], "end_s": ended - began,
            "bit_identical": all(r.tobytes() == expected.tobytes() for r in results)}


def from_iteration(run: dict[str, Any], iteration: int) -> float:
    """Seconds from the (first) start of ``iteration`` to the end of ``run``."""
    return run["end_s"] - next(t for i, t in run["starts"] if i == iteration)


def iteration_durations(run: dict[str, Any]) -> list[tuple[int, float]]:
    """(iteration, ms) for every iteration started, in order (redone ones again)."""
    times = [t for _, t in run["starts"]] + [run["end_s"]]
    return [(i, (times[k + 1] - times[k]) * 1e3) for k, (i, _) in enumerate(run["starts"])]


def mean_latencies(clean: dict[str, Any], failed: dict[str, Any] | None, kill_at: int) -> dict[str, float]:
    """Latencies (ms) as the driver sees them: the mean iteration without a failure; with one, the
    mean over the whole run (redone iterations included) and the iteration the failure hit, from
    its first start until the next iteration starts (restart, replay or redo, and itself)."""
    out = {"without_failure_ms": clean["end_s"] / len(clean["starts"]) * 1e3}
    if failed is not None:
        iterations = len({i for i, _ in failed["starts"]})
        out["with_failure_ms"] = failed["end_s"] / iterations * 1e3
        first = next(t for i, t in failed["starts"] if i == kill_at)
        after = next((t for i, t in failed["starts"] if i == kill_at + 1), failed["end_s"])
        out["hit_iteration_ms"] = (after - first) * 1e3
    return out


def plot_failures(results: list[dict[str, Any]], kill_at: int, title: str, path: Path) -> None:
    """Iteration durations over time, one line per mode's run with a failure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for r in results:
        run = r["with_failure"]
        times = [t for _, t in run["starts"]]
        ax.plot(times, [d for _, d in iteration_durations(run)], marker=".", label=f"{r['ft']} (node 1 killed)")
    ax.axvline(next(t for i, t in results[0]["with_failure"]["starts"] if i == kill_at), color="grey",
               linestyle="--", label=f"kill (iteration {kill_at})")
    ax.set_xlabel("time since the first iteration (s)")
    ax.set_ylabel("iteration duration (ms)")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
