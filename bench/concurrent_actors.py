"""Concurrent async actors (``max_concurrency``): what recording their interleaving costs, and Ray's
async actors beside them.

- ``three 1 s calls``: three calls of an ``async def`` method that sleeps 1 s, on one actor, with
  ``max_concurrency=3`` (and 1, actorrt only): the wall time until all three are back.
- ``interleaved calls/s``: one actor with ``max_concurrency=16`` gets ``--calls`` calls at once from
  the driver, each awaiting ``asyncio.sleep(0)`` ``--steps`` times (a step each, touching the
  actor's state): calls and steps per second until all are back. Each step of a call is recorded
  under ``ft="lineage_stash"`` (the default: its number in the actor's order, in the call's log);
  ``ft="none"`` records nothing. Ray's async actor runs the same class in the same invocation (in
  this Python if it has Ray, else a subprocess of ``--ray-python``, ``.venv-ray/bin/python``).

Each rate is the median of ``--repeat`` rounds. The JSON and the plot go to ``bench/results``.

Run: ``python bench/concurrent_actors.py [--calls 400] [--steps 10] [--repeat 5] [--quick]``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from ray_peer import DEFAULT_RAY_PYTHON, ray_figures
from run_meta import run_meta

RESULTS = Path(__file__).parent / "results"
MODES = ("lineage_stash", "none")  # the default ft first
CONCURRENCY = 16
TARGET_THREE_CALLS_S = 1.2


class Stepper:
    """The same class for actorrt and Ray."""

    def __init__(self) -> None:
        self.steps_taken = 0

    async def walk(self, steps: int) -> int:
        for _ in range(steps):
            self.steps_taken += 1
            await asyncio.sleep(0)
        return self.steps_taken

    async def nap(self, seconds: float) -> float:
        await asyncio.sleep(seconds)
        return seconds

    def ready(self) -> bool:
        return True


def measure(remote: Callable[[type], Any], get: Callable[[Any], Any], calls: int, steps: int,
            repeat: int) -> dict[str, Any]:
    """The figures of one system (``remote``, ``get``: its decorator and its get)."""
    actor_class = remote(Stepper)
    out: dict[str, Any] = {}
    for concurrency in (3, 1) if remote.__module__.startswith("actorrt") else (3,):
        napper = actor_class.options(max_concurrency=concurrency).remote()
        get(napper.ready.remote())
        started = time.perf_counter()
        get([napper.nap.remote(1.0) for _ in range(3)])
        out[f"three 1 s calls, max_concurrency={concurrency} (s)"] = time.perf_counter() - started
    walker = actor_class.options(max_concurrency=CONCURRENCY).remote()
    get(walker.ready.remote())
    get([walker.walk.remote(steps) for _ in range(calls // 4)])  # warm up
    rates = []
    for _ in range(repeat):
        started = time.perf_counter()
        get([walker.walk.remote(steps) for _ in range(calls)])
        rates.append(calls / (time.perf_counter() - started))
    out["interleaved calls/s"] = statistics.median(rates)
    out["steps/s"] = out["interleaved calls/s"] * steps
    out["rounds (calls/s)"] = rates
    return out


def run_actorrt(mode: str, calls: int, steps: int, repeat: int) -> dict[str, Any]:
    import actorrt

    actorrt.init(num_nodes=1, store_shards=1, ft=mode)
    try:
        return measure(actorrt.remote, lambda refs: actorrt.get(refs, timeout=600), calls, steps, repeat)
    finally:
        actorrt.shutdown()


def run_ray(calls: int, steps: int, repeat: int) -> dict[str, Any]:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    try:
        return measure(ray.remote, ray.get, calls, steps, repeat)
    finally:
        ray.shutdown()


def _plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = [s for s in (*(f"actorrt {m}" for m in MODES), "ray") if s in result]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.bar(systems, [result[s]["interleaved calls/s"] for s in systems], color=["C0", "C1", "C2"][:len(systems)])
    left.set_ylabel(f"calls/s ({result['steps']} awaits each, max_concurrency={CONCURRENCY})")
    left.set_title("interleaved calls")
    key = "three 1 s calls, max_concurrency=3 (s)"
    right.bar(systems, [result[s][key] for s in systems], color=["C0", "C1", "C2"][:len(systems)])
    right.axhline(TARGET_THREE_CALLS_S, ls="--", c="k", lw=1, label=f"target {TARGET_THREE_CALLS_S} s")
    right.set_ylabel("seconds until all three are back")
    right.set_title("three 1 s calls, max_concurrency=3")
    right.legend()
    for ax in (left, right):
        ax.tick_params(axis="x", labelrotation=15)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _table(result: dict[str, Any]) -> None:
    systems = [s for s in (*(f"actorrt {m}" for m in MODES), "ray") if s in result]
    print(f"{'system':<22} {'three 1 s calls (s)':>20} {'calls/s':>10} {'steps/s':>10}")
    for s in systems:
        r = result[s]
        print(f"{s:<22} {r['three 1 s calls, max_concurrency=3 (s)']:>20.3f} {r['interleaved calls/s']:>10.0f} "
              f"{r['steps/s']:>10.0f}")
    default = result[f"actorrt {MODES[0]}"]
    sequential = default["three 1 s calls, max_concurrency=1 (s)"]
    three = default["three 1 s calls, max_concurrency=3 (s)"]
    print(f"three 1 s calls: {three:.2f} s with max_concurrency=3 ({sequential:.2f} s with 1); target <= "
          f"{TARGET_THREE_CALLS_S} s: {'met' if three <= TARGET_THREE_CALLS_S else 'MISSED'}")
    if "actorrt none" in result:
        cost = default["interleaved calls/s"] / result["actorrt none"]["interleaved calls/s"]
        print(f"recording the interleaving: {cost:.2f}x the calls/s of ft=none")
    if "ray" in result:
        ratio = default["interleaved calls/s"] / result["ray"]["interleaved calls/s"]
        print(f"against Ray's async actor: {ratio:.2f}x its calls/s (ft={MODES[0]})")


@click.command()
@click.option("--calls", default=400, show_default=True, help="Calls per round, all submitted at once.")
@click.option("--steps", default=10, show_default=True, help="Awaits per call.")
@click.option("--repeat", default=5, show_default=True, help="Rounds per system (the median is reported).")
@click.option("--ray/--no-ray", "with_ray", default=True, show_default=True, help="Run Ray too, if installed.")
@click.option("--ray-python", default=DEFAULT_RAY_PYTHON,
              show_default=True, help="A Python with Ray, run as a subprocess when this one has none.")
@click.option("--ray-only", is_flag=True, hidden=True, help="Print Ray's figures as JSON (the subprocess).")
@click.option("--quick", is_flag=True, help="100 calls, 3 rounds.")
def main(calls: int, steps: int, repeat: int, with_ray: bool, ray_python: str, ray_only: bool, quick: bool) -> None:
    calls, repeat = (100, 3) if quick else (calls, repeat)
    if ray_only:
        print(json.dumps(run_ray(calls, steps, repeat)))
        return
    stamp, result = run_meta(calls=calls, steps=steps, repeat=repeat, concurrency=CONCURRENCY)
    for mode in MODES:
        result[f"actorrt {mode}"] = run_actorrt(mode, calls, steps, repeat)
    ray = ray_figures(lambda: run_ray(calls, steps, repeat), __file__,
                      ["--calls", str(calls), "--steps", str(steps), "--repeat", str(repeat)], ray_python) \
        if with_ray else None
    if ray is not None:
        result["ray"] = ray
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "concurrent_actors.json").write_text(json.dumps(result, indent=2))
    _plot(result, RESULTS / "concurrent_actors.png")
    _table(result)
    print(f"wrote {RESULTS / 'concurrent_actors.json'} and {RESULTS / 'concurrent_actors.png'} ({stamp})")


if __name__ == "__main__":
    sys.exit(main())
