"""The ring the ring benchmarks run: P actors passing P tokens, fire-and-forget, on actorrt or Ray.

Actor ``i`` knows its successor ``(i + 1) % P``. A hop method that does not own the token submits
the next hop with ``.remote()`` and returns without awaiting it; the origin of a token records
each round's time with its own clock. ``run_actorrt`` and ``run_ray`` return the per-hop summary.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import click
import numpy as np

PERCENTILES = (50, 90, 99)
POLL_S = 0.1
SETTLE_S = 0.2  # wait after a ring before reading the lineage statistics


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


def calibrate() -> float:
    """Seconds for a fixed pure-Python loop: this machine's speed varies by tens of percent over
    minutes, so results carry it to tell a slower machine from a slower runtime."""
    t = time.perf_counter()
    acc = 0
    for i in range(2_000_000):
        acc += i
    return time.perf_counter() - t


def summary(round_times: list[list[float]], actors: int, warmup: int) -> dict[str, Any]:
    """Per-hop latency statistics (ms) from each origin's round times (s), warm-up dropped."""
    kept = [t[warmup:] for t in round_times if len(t) > warmup]  # actors that own no token have none
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


def drive(make_actor: Any, make_collector: Any, get: Any, actors: int, rounds: int,
           timeout: float, tokens: int | None = None, on_poll: Any = None,
           poll_s: float = POLL_S) -> tuple[list[list[float]], float]:
    """Build the ring, start every token, wait for all origins; returns round times and wall time.

    ``tokens`` (default: one per actor) tokens start at evenly spaced actors. ``on_poll(elapsed_s)``,
    if given, is called between polls of the collector (every ``poll_s`` seconds), e.g. to sample
    ``actorrt.stats()`` during the run."""
    tokens = actors if tokens is None else tokens
    ring = [make_actor(i) for i in range(actors)]
    collector = make_collector()
    get([a.ready.remote() for a in ring] + [collector.count.remote()], 120)
    get([ring[i].set_next.remote(ring[(i + 1) % actors], collector) for i in range(actors)], 60)
    t_start = time.perf_counter()
    for k in range(tokens):
        ring[k * actors // tokens].start.remote()
    deadline = t_start + timeout
    while True:
        done = get(collector.count.remote(), 30)
        if done >= tokens:
            break
        if time.perf_counter() > deadline:
            raise click.ClickException(f"ring did not finish in {timeout} s ({done}/{tokens} origins done)")
        if on_poll is not None:
            on_poll(time.perf_counter() - t_start)
        time.sleep(poll_s)
    wall = time.perf_counter() - t_start
    results = get([a.results.remote() for a in ring], 60)
    return [r["times"] for r in sorted(results, key=lambda r: r["index"])], wall


def lineage_stats(stats: dict[str, Any]) -> dict[str, Any]:
    """The lineage counters of ``actorrt.stats()``: per node (by slot) and the driver's."""
    return {"nodes": {str(n["node"]): n.get("lineage", {}) for n in stats["nodes"]},
            "driver": stats["driver"].get("lineage", {})}


def run_actorrt(actors: int, nodes: int, rounds: int, warmup: int, timeout: float,
                hold: float, ft: str = "lineage_stash", nondeterministic: bool = True,
                store_delay_ms: float = 0.0, max_forwards: int | None = None,
                store_replicas: int = 0) -> dict[str, Any]:
    import actorrt

    actorrt.init(num_nodes=nodes, ft=ft, store_delay_ms=store_delay_ms, max_forwards=max_forwards,
                 store_replicas=store_replicas)
    try:
        node_pids = {n["node"]: n["pid"] for n in actorrt.nodes()}
        ring_cls = actorrt.remote(RingActor)
        coll_cls = actorrt.remote(Collector)
        if hold > 0:  # time to attach a profiler (py-spy) to the node processes
            click.echo(f"actorrt node pids: {node_pids}; starting in {hold:.0f} s", err=True)
            time.sleep(hold)
        times, wall = drive(
            lambda i: ring_cls.options(node=i % nodes, nondeterministic=nondeterministic).remote(
                i, actors, warmup + rounds),
            # Deterministic: the collector's few calls must not carry lineage (it would count in the
            # forwarded-lineage statistics).
            lambda: coll_cls.options(node=0, nondeterministic=False).remote(),
            lambda refs, t: actorrt.get(refs, timeout=t),
            actors, rounds, timeout,
        )
        lineage = None
        if ft != "none":  # a moment after the ring: what is still stashed then did not drain
            time.sleep(SETTLE_S + store_delay_ms / 1e3)
            lineage = lineage_stats(actorrt.stats())
    finally:
        actorrt.shutdown()
    written = 0 if lineage is None else sum(n.get("store_bytes_written", 0) for n in
                                            [*lineage["nodes"].values(), lineage["driver"]])
    hops = actors * actors * (rounds + warmup)  # every token hops once per actor and round
    return {"system": "actorrt", "ft": ft, "nondeterministic": nondeterministic,
            "store_delay_ms": store_delay_ms, "max_forwards": max_forwards,
            "store_bytes_per_task": written / hops,
            "rounds": rounds, "warmup": warmup,
            "nodes": nodes, "placement": "actor i on node i % nodes",
            "wall_s": wall, "node_pids": node_pids, "lineage_at_end": lineage,
            **summary(times, actors, warmup)}


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
        times, wall = drive(
            lambda i: ring_cls.remote(i, actors, warmup + rounds),
            lambda: coll_cls.remote(),
            lambda refs, t: ray.get(refs, timeout=t),
            actors, rounds, timeout,
        )
    finally:
        ray.shutdown()
    return {"system": "ray", "version": ray.__version__,
            "placement": "one worker process per actor on the local node (Ray has no node processes here)",
            "wall_s": wall, **summary(times, actors, warmup)}


def register_pickle_by_value(*modules: Any) -> None:
    """Node processes (and Ray workers) must unpickle the bench's classes wherever this file lives."""
    import cloudpickle

    for m in modules:
        if m.__name__ != "__main__":
            cloudpickle.register_pickle_by_value(m)
