"""How fast a lost node's actors replay, against how fast they ran the same tasks the first time.

The actor ring of ``bench/ring.py`` (P actors on 2 nodes, P tokens, fire-and-forget hops, no
checkpoints) runs R rounds under the lineage stash. Then node 1 is SIGKILLed: its actors are
rebuilt from their constructors by replaying every hop they ran. The first execution's rate is
node 1's hops over the ring's wall time (both nodes busy, sharing the cores); the replay's is what
``actorrt.stats()`` reports for the recovery (tasks replayed over the replay's time). The rebuilt
actors' state (hops forwarded, rounds recorded) is checked against what they had before the kill.

Writes ``bench/results/replay-rate-<time>.json`` and ``.png`` and prints a table with the target
(replay >= 4x the first execution's rate).

Run: ``python bench/replay_rate.py [--actors 8] [--rounds 300] [--repeat 3]``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import click
from rich.progress import Progress
from ring_actors import Collector, RingActor, drive
from run_meta import run_meta

import actorrt

TARGET_RATIO = 4.0  # replay's tasks per second / the first execution's
RESULTS = Path(__file__).parent / "results"


def _recovery(slot: int, timeout: float = 120.0) -> dict[str, Any]:
    """The finished recovery of node ``slot`` (its replay done), from ``actorrt.stats()``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for node in actorrt.stats()["nodes"]:
            done = [r for r in node.get("recoveries", []) if r.get("replay_ms", 0) > 0 and slot in r.get("slots", [])]
            if node["node"] == slot and done:
                return done[-1]
        time.sleep(0.05)
    raise click.ClickException(f"node {slot} did not finish replaying in {timeout} s")


def run(actors: int, rounds: int) -> dict[str, Any]:
    actorrt.init(num_nodes=2, ft="lineage_stash")
    try:
        ring_cls, coll_cls = actorrt.remote(RingActor), actorrt.remote(Collector)
        ring: list = []

        def make(i: int) -> Any:
            ring.append(ring_cls.options(node=i % 2, nondeterministic=False).remote(i, actors, rounds))
            return ring[-1]

        _, wall = drive(make, lambda: coll_cls.options(node=0, nondeterministic=False).remote(),
                        lambda refs, t: actorrt.get(refs, timeout=t), actors, rounds, 300)
        before = [{k: v for k, v in r.items() if k != "pid"} for r in actorrt.get([a.results.remote() for a in ring])]
        lost = [i for i in range(actors) if i % 2 == 1]
        first_tasks = sum(len(before[i]["times"]) + before[i]["forwarded"] for i in lost)
        actorrt.kill_node(1)
        recovery = _recovery(1)
        after = [{k: v for k, v in r.items() if k != "pid"}
                 for r in actorrt.get([a.results.remote() for a in ring], timeout=120)]
    finally:
        actorrt.shutdown()
    # Round times are clock readings of the first execution, which the replay reads again from the log
    # only if recorded; forwarded hops and rounds recorded must be the same.
    same = all(a["forwarded"] == b["forwarded"] and len(a["times"]) == len(b["times"]) for a, b in zip(after, before,
                                                                                                       strict=True))
    first_rate = first_tasks / wall
    return {"actors": actors, "rounds": rounds, "wall_s": wall, "first_tasks": first_tasks,
            "first_tasks_per_s": first_rate, "recovery": recovery, "replay_tasks_per_s": recovery["replay_tasks_per_s"],
            "ratio": recovery["replay_tasks_per_s"] / first_rate, "state_same": same}


def _plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    xs = range(len(results))
    ax.bar([x - 0.2 for x in xs], [r["first_tasks_per_s"] for r in results], 0.4, label="first execution")
    ax.bar([x + 0.2 for x in xs], [r["replay_tasks_per_s"] for r in results], 0.4, label="replay")
    ax.set_xticks(list(xs), [f"run {i + 1}" for i in xs])
    ax.set_ylabel("tasks per second (node 1's actors)")
    ax.set_title("Replay rate against first execution (actor ring)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


@click.command()
@click.option("--actors", default=8, show_default=True)
@click.option("--rounds", default=300, show_default=True, help="rounds per token before the kill")
@click.option("--repeat", default=1, show_default=True, help="runs, each on a fresh cluster")
def main(actors: int, rounds: int, repeat: int) -> None:
    """Replay's tasks per second against the first execution's, for the actors of a killed node."""
    results = []
    with Progress(transient=True) as progress:
        task = progress.add_task("replay rate", total=repeat)
        for _ in range(repeat):
            results.append(run(actors, rounds))
            progress.advance(task)
    click.echo(f"replay rate: a ring of {actors} actors on 2 nodes, {rounds} rounds, node 1 killed after; "
               f"{os.cpu_count()} cores")
    click.echo(f"{'run':<5}{'tasks':>8}{'first /s':>10}{'replayed':>10}{'replay /s':>11}{'replay ms':>11}"
               f"{'ratio':>8}{'state same':>12}")
    for i, r in enumerate(results):
        rec = r["recovery"]
        click.echo(f"{i + 1:<5}{r['first_tasks']:>8}{r['first_tasks_per_s']:>10.0f}{rec['tasks_replayed']:>10}"
                   f"{r['replay_tasks_per_s']:>11.0f}{rec['replay_ms']:>11.1f}{r['ratio']:>8.2f}{str(r['state_same']):>12}")
    best = max(r["ratio"] for r in results)
    click.echo(f"replay / first execution, tasks per second: {best:.2f}x at best (target >= {TARGET_RATIO}x)")
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp, meta = run_meta(actors=actors, rounds=rounds)
    (RESULTS / f"replay-rate-{stamp}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    _plot(results, RESULTS / f"replay-rate-{stamp}.png")
    click.echo(f"wrote {RESULTS}/replay-rate-{stamp}.json and .png")
    if not all(r["state_same"] for r in results):
        raise SystemExit("a replayed actor's state differs from what it was before the kill")


if __name__ == "__main__":
    main()
