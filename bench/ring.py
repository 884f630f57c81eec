"""Actor ring latency: P tokens circulating through a ring of P actors, fire-and-forget.

Actor ``i`` lives on node ``i % nodes`` and knows its successor ``(i + 1) % P``. Every actor sends
a no-op ``hop`` task carrying its own token (origin, round) to its successor; a hop method that does
not own the token submits the next hop with ``.remote()`` and returns without awaiting it. When a
token comes back to its origin it has made one round: the origin records the round-trip time with
``time.perf_counter()`` (its own clock only) and sends the token on again. All P tokens circulate at
once. Per-hop latency = round-trip time / P. Warm-up rounds are discarded; the driver collects each
actor's list of round times at the end with one method call.

``--peer ray`` runs the same ring on Ray actors in the same run (Ray on one machine has no node
processes: every Ray actor is its own worker process) and prints actorrt / Ray per percentile.

Run: ``python bench/ring.py [--actors 8] [--nodes 2] [--rounds 400] [--warmup 50] [--peer ray]``.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import click
import numpy as np

# Issue targets on the 2-core machine (8 actors, 2 nodes).
TARGET_P50_MS = 0.35
TARGET_RATIO_TO_RAY = 0.25
PERCENTILES = (50, 90, 99)
POLL_S = 0.1


class RingActor:
    """One member of the ring; the same plain class runs on actorrt and on Ray."""

    def __init__(self, index: int, size: int, total_rounds: int) -> None:
        self.index = index
        self.size = size
        self.total_rounds = total_rounds
        self.next: Any = None
        self.collector: Any = None
        self.t0 = 0.0
        self.times: list[float] = []
        self.forwarded = 0

    def ready(self) -> int:
        return self.index

    def set_next(self, nxt: Any, collector: Any) -> int:
        self.next = nxt
        self.collector = collector
        return self.index

    def start(self) -> None:
        self.t0 = time.perf_counter()
        self.next.hop.remote(self.index, 0)

    def hop(self, origin: int, rnd: int) -> None:
        if origin != self.index:
            self.forwarded += 1
            self.next.hop.remote(origin, rnd)  # fire-and-forget: the ref is dropped
            return
        now = time.perf_counter()
        self.times.append(now - self.t0)
        if rnd + 1 < self.total_rounds:
            self.t0 = now
            self.next.hop.remote(origin, rnd + 1)
        else:
            self.collector.done.remote(self.index)

    def results(self) -> dict[str, Any]:
        return {"index": self.index, "times": self.times, "forwarded": self.forwarded, "pid": os.getpid()}


class Collector:
    """Counts origins whose token finished all its rounds; the driver polls it."""

    def __init__(self) -> None:
        self.finished: list[int] = []

    def done(self, index: int) -> None:
        self.finished.append(index)

    def count(self) -> int:
        return len(self.finished)


def _calibrate() -> float:
    """Seconds for a fixed pure-Python loop: this machine's speed varies by tens of percent over
    minutes, so results carry it to tell a slower machine from a slower runtime."""
    t = time.perf_counter()
    acc = 0
    for i in range(2_000_000):
        acc += i
    return time.perf_counter() - t


def _summary(round_times: list[list[float]], actors: int, warmup: int) -> dict[str, Any]:
    """Per-hop latency statistics (ms) from each origin's round times (s), warm-up dropped."""
    kept = [t[warmup:] for t in round_times]
    rounds = np.concatenate([np.asarray(t, dtype=float) for t in kept]) if kept else np.empty(0)
    hop_ms = rounds * 1e3 / actors
    if hop_ms.size == 0:
        raise click.ClickException("no measured rounds (is --rounds > --warmup?)")
    pct = {f"p{p}": float(np.percentile(hop_ms, p)) for p in PERCENTILES}
    mean_round = float(rounds.mean())
    counts, edges = np.histogram(hop_ms, bins=np.logspace(np.log10(max(hop_ms.min(), 1e-3) * 0.9),
                                                          np.log10(hop_ms.max() * 1.1), 60))
    return {
        "per_hop_ms": {**pct, "mean": float(hop_ms.mean()), "min": float(hop_ms.min()),
                       "max": float(hop_ms.max())},
        "samples": int(hop_ms.size),
        # P tokens each make P hops per round, so the ring as a whole does P*P hops per mean round.
        "throughput_hops_per_s": actors * actors / mean_round,
        "per_origin_p50_ms": [float(np.median(np.asarray(t) * 1e3 / actors)) for t in kept],
        "histogram_ms": {"edges": [round(float(e), 5) for e in edges], "counts": counts.tolist()},
        "per_hop_samples_ms": [round(float(x), 4) for x in hop_ms],
    }


def _drive(make_actor: Any, make_collector: Any, get: Any, actors: int, rounds: int,
           timeout: float) -> tuple[list[list[float]], float]:
    """Build the ring, start every token, wait for all origins; returns round times and wall time."""
    ring = [make_actor(i) for i in range(actors)]
    collector = make_collector()
    get([a.ready.remote() for a in ring] + [collector.count.remote()], 120)
    get([ring[i].set_next.remote(ring[(i + 1) % actors], collector) for i in range(actors)], 60)
    t_start = time.perf_counter()
    for a in ring:
        a.start.remote()
    deadline = t_start + timeout
    while True:
        done = get(collector.count.remote(), 30)
        if done >= actors:
            break
        if time.perf_counter() > deadline:
            raise click.ClickException(f"ring did not finish in {timeout} s ({done}/{actors} origins done)")
        time.sleep(POLL_S)
    wall = time.perf_counter() - t_start
    results = get([a.results.remote() for a in ring], 60)
    return [r["times"] for r in sorted(results, key=lambda r: r["index"])], wall


def run_actorrt(actors: int, nodes: int, rounds: int, warmup: int, timeout: float,
                hold: float, ft: str = "lineage_stash", nondeterministic: bool = True) -> dict[str, Any]:
    import actorrt

    actorrt.init(num_nodes=nodes, ft=ft)
    try:
        node_pids = {n["node"]: n["pid"] for n in actorrt.nodes()}
        ring_cls = actorrt.remote(RingActor)
        coll_cls = actorrt.remote(Collector)
        if hold > 0:  # time to attach a profiler (py-spy) to the node processes
            click.echo(f"actorrt node pids: {node_pids}; starting in {hold:.0f} s", err=True)
            time.sleep(hold)
        times, wall = _drive(
            lambda i: ring_cls.options(node=i % nodes, nondeterministic=nondeterministic).remote(
                i, actors, warmup + rounds),
            lambda: coll_cls.options(node=0).remote(),
            lambda refs, t: actorrt.get(refs, timeout=t),
            actors, rounds, timeout,
        )
    finally:
        actorrt.shutdown()
    return {"system": "actorrt", "ft": ft, "nondeterministic": nondeterministic,
            "nodes": nodes, "placement": "actor i on node i % nodes",
            "wall_s": wall, "node_pids": node_pids, **_summary(times, actors, warmup)}


def ray_available() -> tuple[bool, str]:
    try:
        import ray
    except ImportError as exc:
        return False, f"Ray is not importable ({exc})"
    return True, ray.__version__


def run_ray(actors: int, rounds: int, warmup: int, timeout: float) -> dict[str, Any]:
    import logging

    import ray

    if __name__ != "__main__":
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=max(actors, os.cpu_count() or 1), include_dashboard=False,
             logging_level=logging.ERROR, log_to_driver=False)
    try:
        # Ray actors hold 0 CPUs while running; num_cpus=0 makes placement independent of the count.
        ring_cls = ray.remote(num_cpus=0)(RingActor)
        coll_cls = ray.remote(num_cpus=0)(Collector)
        times, wall = _drive(
            lambda i: ring_cls.remote(i, actors, warmup + rounds),
            lambda: coll_cls.remote(),
            lambda refs, t: ray.get(refs, timeout=t),
            actors, rounds, timeout,
        )
    finally:
        ray.shutdown()
    return {"system": "ray", "version": ray.__version__,
            "placement": "one worker process per actor on the local node (Ray has no node processes here)",
            "wall_s": wall, **_summary(times, actors, warmup)}


def _plot(results: list[dict[str, Any]], params: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in results:
        xs = np.sort(np.asarray(r["per_hop_samples_ms"]))
        ys = np.arange(1, xs.size + 1) / xs.size
        p = r["per_hop_ms"]
        ax.plot(xs, ys, label=f"{r['system']} (p50 {p['p50']:.3f} ms, p99 {p['p99']:.3f} ms)")
    ax.axvline(TARGET_P50_MS, color="grey", linestyle="--", linewidth=1, label=f"target p50 {TARGET_P50_MS} ms")
    ax.set_xscale("log")
    ax.set_xlabel("per-hop latency (ms) = round-trip time / actors")
    ax.set_ylabel("CDF")
    ax.set_title(f"Actor ring: {params['actors']} actors, {params['nodes']} nodes, "
                 f"{params['rounds']} rounds/origin, fire-and-forget")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _table(results: list[dict[str, Any]], ratios: dict[str, float] | None) -> str:
    cols = [f"p{p}" for p in PERCENTILES] + ["mean"]
    lines = [f"{'system':<8} " + " ".join(f"{c + ' ms':>9}" for c in cols) + f" {'hops/s':>9} {'samples':>8}"]
    for r in results:
        p = r["per_hop_ms"]
        lines.append(f"{r['system']:<8} " + " ".join(f"{p[c]:>9.3f}" for c in cols)
                     + f" {r['throughput_hops_per_s']:>9.0f} {r['samples']:>8}")
    if ratios:
        lines.append(f"{'ratio':<8} " + " ".join(f"{ratios.get(c, float('nan')):>8.3f}x" for c in cols)
                     + "   (actorrt / ray)")
    return "\n".join(lines)


@click.command()
@click.option("--actors", default=8, show_default=True, help="actors in the ring (= tokens in flight)")
@click.option("--nodes", default=2, show_default=True, help="actorrt node processes (actor i on node i % nodes)")
@click.option("--rounds", default=300, show_default=True, help="measured rounds per token")
@click.option("--warmup", default=30, show_default=True, help="warm-up rounds per token, discarded")
@click.option("--out", "out_dir", default="bench/results", show_default=True, type=click.Path(file_okay=False),
              help="directory for the JSON and PNG")
@click.option("--peer", type=click.Choice(["ray"]), default=None, help="also run the ring on this system")
@click.option("--ft", type=click.Choice(["lineage_stash", "write_first", "none"]), default="lineage_stash",
              show_default=True, help="actorrt's lineage logging (none = the runtime alone)")
@click.option("--deterministic", is_flag=True, help="ring actors are deterministic receivers (default: not)")
@click.option("--timeout", default=120.0, show_default=True, help="seconds one ring may take")
@click.option("--hold", default=0.0, show_default=True,
              help="seconds to wait after start-up before the ring runs (to attach py-spy to the nodes)")
def main(actors: int, nodes: int, rounds: int, warmup: int, out_dir: str, peer: str | None,
         ft: str, deterministic: bool, timeout: float, hold: float) -> None:
    """Per-hop latency of a ring of actors with P tokens in flight (actorrt, optionally vs Ray)."""
    if actors < 2 or nodes < 1 or rounds < 1 or warmup < 0:
        raise click.BadParameter("need --actors >= 2, --nodes >= 1, --rounds >= 1, --warmup >= 0")
    # Node processes (and Ray workers) must be able to unpickle RingActor wherever this file lives.
    if __name__ != "__main__":
        import cloudpickle

        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    now = _dt.datetime.now()
    params = {"actors": actors, "nodes": nodes, "rounds": rounds, "warmup": warmup, "peer": peer,
              "ft": ft, "nondeterministic": not deterministic,
              "mode": "fire-and-forget", "payload": "(origin:int, round:int)",
              "per_hop": "round-trip time measured in the origin actor / actors"}
    machine = {"cores": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
               "calibration_loop_s_before": _calibrate()}

    results = [run_actorrt(actors, nodes, rounds, warmup, timeout, hold, ft, not deterministic)]
    peer_note = None
    if peer == "ray":
        ok, info = ray_available()
        if ok:
            try:
                results.append(run_ray(actors, rounds, warmup, timeout))
            except Exception as exc:  # noqa: BLE001 - a broken peer must not lose the actorrt figures
                peer_note = f"--peer ray: Ray {info} is importable but its ring failed: {exc!r}; reporting actorrt only"
                click.echo(peer_note, err=True)
        else:
            peer_note = f"--peer ray: {info}; reporting actorrt only"
            click.echo(peer_note, err=True)

    machine["calibration_loop_s_after"] = _calibrate()
    ratios = None
    if len(results) == 2:
        a, r = results[0]["per_hop_ms"], results[1]["per_hop_ms"]
        ratios = {k: a[k] / r[k] for k in a if k in ("p50", "p90", "p99", "mean")}
    act = results[0]["per_hop_ms"]
    targets = {
        "p50_ms_max": TARGET_P50_MS, "p50_ms": act["p50"], "p50_over_target": act["p50"] / TARGET_P50_MS,
        "p50_met": act["p50"] <= TARGET_P50_MS,
        "ratio_to_ray_max": TARGET_RATIO_TO_RAY,
        "ratio_p50": ratios["p50"] if ratios else None,
        "ratio_met": (ratios["p50"] <= TARGET_RATIO_TO_RAY) if ratios else None,
        "applies_to": "8 actors, 2 nodes, 2-core machine",
    }

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"ring-{now:%Y%m%d-%H%M%S}"
    doc = {"benchmark": "ring", "date": now.isoformat(timespec="seconds"), "machine": machine,
           "params": params, "results": results, "ratio_actorrt_over_ray": ratios,
           "targets": targets, "note": peer_note}
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1))
    _plot(results, params, out / f"{stem}.png")

    click.echo(f"ring: {actors} actors, {nodes} nodes, {rounds} rounds (+{warmup} warm-up) per token, "
               f"{machine['cores']} cores (calibration loop {machine['calibration_loop_s_before']:.2f} s before, "
               f"{machine['calibration_loop_s_after']:.2f} s after)")
    click.echo(_table(results, ratios))
    verdict = "met" if targets["p50_met"] else "NOT met"
    line = f"target p50 <= {TARGET_P50_MS} ms: {verdict} ({act['p50'] / TARGET_P50_MS:.2f}x the target)"
    if ratios:
        v2 = "met" if targets["ratio_met"] else "NOT met"
        line += f"; target <= {TARGET_RATIO_TO_RAY}x Ray at p50: {v2} ({ratios['p50']:.3f}x)"
    click.echo(line)
    if peer_note:
        click.echo(peer_note)
    click.echo(f"wrote {out / stem}.json and .png")


if __name__ == "__main__":
    main()
