"""What the recovery benchmarks share: timed runs of an iterative job, with a node killed in one
iteration, read as iteration durations, the failure's cost, and a plot.

A run records when each iteration started (a rolled-back iteration starts again) and when the run
ended. The failure's cost is the time from the start of the killed iteration to the end, with the
failure minus without: the iterations before it are the same work in both runs, and leaving them
out keeps their noise out of the difference.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def from_iteration(run: dict[str, Any], iteration: int) -> float:
    """Seconds from the (first) start of ``iteration`` to the end of ``run``."""
    return run["end_s"] - next(t for i, t in run["starts"] if i == iteration)


def iteration_durations(run: dict[str, Any]) -> list[tuple[int, float]]:
    """(iteration, ms) for every iteration started, in order (redone ones again)."""
    times = [t for _, t in run["starts"]] + [run["end_s"]]
    return [(i, (times[k + 1] - times[k]) * 1e3) for k, (i, _) in enumerate(run["starts"])]


def mean_latencies(clean: dict[str, Any], failed: dict[str, Any] | None, kill_at: int) -> dict[str, float]:
    """Mean iteration latency (ms) without a failure, and during one: over the iterations from the
    killed one to the first that runs as fast as before again (a redone one counts each time)."""
    clean_ms = [d for _, d in iteration_durations(clean)]
    out = {"without_failure_ms": sum(clean_ms) / len(clean_ms)}
    if failed is not None:
        durations = iteration_durations(failed)
        start = next(k for k, (i, _) in enumerate(durations) if i == kill_at)
        normal = 2 * sorted(clean_ms)[len(clean_ms) // 2]
        end = next((k for k in range(start + 1, len(durations)) if durations[k][1] <= normal), len(durations))
        during = [d for _, d in durations[start:end]]
        out["during_failure_ms"] = sum(during) / len(during)
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
