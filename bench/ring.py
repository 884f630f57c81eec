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

``--sweep`` (or lists for ``--ft``, ``--store-delay-ms``, ``--max-forwards``, ``--receivers both``)
runs one ring per lineage-logging configuration in one invocation, each on a fresh cluster, and
plots p50/p99 per hop against the added store latency (the paper's Figures 10a-c) with issue 3's
target ratios, which only mean something within one run: the machine is noisy.

Run: ``python bench/ring.py [--actors 8] [--nodes 2] [--rounds 400] [--warmup 50] [--peer ray]``,
``python bench/ring.py --sweep [--slow-rounds 60]``.
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


def _drive(make_actor: Any, make_collector: Any, get: Any, actors: int, rounds: int,
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
                store_delay_ms: float = 0.0, max_forwards: int | None = None) -> dict[str, Any]:
    import actorrt

    actorrt.init(num_nodes=nodes, ft=ft, store_delay_ms=store_delay_ms, max_forwards=max_forwards)
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
    return {"system": "actorrt", "ft": ft, "nondeterministic": nondeterministic,
            "store_delay_ms": store_delay_ms, "max_forwards": max_forwards,
            "rounds": rounds, "warmup": warmup,
            "nodes": nodes, "placement": "actor i on node i % nodes",
            "wall_s": wall, "node_pids": node_pids, "lineage_at_end": lineage,
            **_summary(times, actors, warmup)}


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


# ---- sweeps over lineage-logging configurations (issue 3: the paper's Figures 10a-c) ------------

FT_MODES = ("lineage_stash", "write_first", "none")
SWEEP_DELAYS_MS = (0.0, 1.0, 5.0)
SWEEP_FORWARDS: tuple[int | None, ...] = (None, 8)
SWEEP_ROUNDS, SWEEP_WARMUP = 150, 20
# Issue 3's targets, each a ratio of two p50s measured in the same run.
RATIO_TARGETS = {
    "det_ls_5ms_over_0ms": 1.15,
    "ls_over_wf_0ms_det": 0.6,
    "ls_over_wf_0ms_nondet": 0.6,
    "nondet_f8_ls_over_wf_5ms": 0.1,
    "det_ls_over_none_0ms": 1.3,
}


def parse_list(text: str, item: Any, what: str) -> list[Any]:
    """``"0,1,5"`` -> ``[item("0"), ...]`` (duplicates dropped, order kept)."""
    out: list[Any] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            value = item(part)
        except ValueError as exc:
            raise click.BadParameter(f"{what}: cannot read {part!r} ({exc})") from None
        if value not in out:
            out.append(value)
    if not out:
        raise click.BadParameter(f"{what}: empty list")
    return out


def _delay(text: str) -> float:
    v = float(text)
    if v < 0:
        raise ValueError("must be >= 0")
    return v


def _forwards(text: str) -> int | None:
    if text.lower() in ("none", "inf", "unlimited"):
        return None
    v = int(text)
    if v < 0:
        raise ValueError("must be >= 0 or none")
    return v


def _mode(text: str) -> str:
    if text not in FT_MODES:
        raise ValueError(f"one of {', '.join(FT_MODES)}")
    return text


def config_key(c: dict[str, Any]) -> tuple[Any, ...]:
    return (c["ft"], c["nondeterministic"], c["store_delay_ms"], c["max_forwards"])


def config_label(c: dict[str, Any]) -> str:
    if c["ft"] == "none":
        return "none"
    kind = "nondet" if c["nondeterministic"] else "det"
    mode = {"lineage_stash": "LS", "write_first": "WF"}[c["ft"]]
    f = ""
    if c["ft"] == "lineage_stash" and c["nondeterministic"]:
        f = " f=" + ("inf" if c["max_forwards"] is None else str(c["max_forwards"]))
    return f"{mode} {kind}{f} +{c['store_delay_ms']:g}ms"


def build_configs(fts: list[str], kinds: list[bool], delays: list[float],
                  forwards: list[int | None]) -> list[dict[str, Any]]:
    """The cross product, without runs that cannot differ: ``none`` ignores the receiver kind, the
    store delay and f (one run); f only matters for lineage_stash with nondeterministic receivers."""
    out: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    for delay in delays:
        for ft in fts:
            for nondet in kinds:
                for f in forwards:
                    if ft == "none":
                        c = {"ft": ft, "nondeterministic": False, "store_delay_ms": 0.0, "max_forwards": None}
                    elif ft == "write_first" or not nondet:
                        c = {"ft": ft, "nondeterministic": nondet, "store_delay_ms": delay, "max_forwards": None}
                    else:
                        c = {"ft": ft, "nondeterministic": nondet, "store_delay_ms": delay, "max_forwards": f}
                    if config_key(c) not in seen:
                        seen.add(config_key(c))
                        out.append(c)
    return out


def _find(results: list[dict[str, Any]], ft: str, nondet: bool | None = None, delay: float | None = None,
          f: int | None | str = "any") -> dict[str, Any] | None:
    for r in results:
        if r["ft"] != ft:
            continue
        if nondet is not None and ft != "none" and r["nondeterministic"] != nondet:
            continue
        if delay is not None and ft != "none" and r["store_delay_ms"] != delay:
            continue
        if f != "any" and r["max_forwards"] != f:
            continue
        return r
    return None


def sweep_ratios(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Issue 3's target ratios (p50 over p50) from whichever configurations this run has."""
    def p50(r: dict[str, Any] | None) -> float | None:
        return None if r is None else r["per_hop_ms"]["p50"]

    ls_det0, ls_det5 = _find(results, "lineage_stash", False, 0.0), _find(results, "lineage_stash", False, 5.0)
    nondet_f8 = _find(results, "lineage_stash", True, 5.0, 8)
    pairs = {
        "det_ls_5ms_over_0ms": (ls_det5, ls_det0, "deterministic lineage stash: p50 at +5 ms / p50 at +0 ms"),
        "ls_over_wf_0ms_det": (ls_det0, _find(results, "write_first", False, 0.0),
                               "deterministic, +0 ms: lineage stash p50 / WriteFirst p50"),
        "ls_over_wf_0ms_nondet": (_find(results, "lineage_stash", True, 0.0, None)
                                  or _find(results, "lineage_stash", True, 0.0),
                                  _find(results, "write_first", True, 0.0),
                                  "nondeterministic, +0 ms: lineage stash (f unlimited) p50 / WriteFirst p50"),
        "nondet_f8_ls_over_wf_5ms": (nondet_f8, _find(results, "write_first", True, 5.0),
                                     "nondeterministic, f = 8, +5 ms: lineage stash p50 / WriteFirst p50"),
        "det_ls_over_none_0ms": (ls_det0, _find(results, "none"),
                                 "deterministic lineage stash at +0 ms p50 / ft=none p50"),
    }
    out: dict[str, dict[str, Any]] = {}
    for name, (num, den, what) in pairs.items():
        if num is None or den is None:
            continue
        ratio = p50(num) / p50(den)
        target = RATIO_TARGETS[name]
        out[name] = {"what": what, "numerator": config_label(num), "denominator": config_label(den),
                     "p50_ms": [p50(num), p50(den)], "ratio": ratio, "target_max": target,
                     "met": ratio <= target, "ratio_over_target": ratio / target}
    return out


def run_sweep(configs: list[dict[str, Any]], actors: int, nodes: int, rounds: int, warmup: int,
              slow_rounds: int, slow_warmup: int, timeout: float) -> list[dict[str, Any]]:
    """One ring per configuration, in order, each on a fresh cluster. WriteFirst with a store delay
    runs ``slow_rounds`` (+``slow_warmup``) rounds per token: every hop waits for the store there."""
    results = []
    for n, c in enumerate(configs, 1):
        slow = c["ft"] == "write_first" and c["store_delay_ms"] > 0
        r_rounds, r_warmup = (slow_rounds, slow_warmup) if slow else (rounds, warmup)
        t = time.perf_counter()
        r = run_actorrt(actors, nodes, r_rounds, r_warmup, timeout, 0.0, c["ft"], c["nondeterministic"],
                        c["store_delay_ms"], c["max_forwards"])
        r["label"] = config_label(c)
        r["config_index"] = n - 1
        results.append(r)
        click.echo(f"[{n}/{len(configs)}] {r['label']:<24} p50 {r['per_hop_ms']['p50']:7.3f} ms  "
                   f"p99 {r['per_hop_ms']['p99']:7.3f} ms  {r['throughput_hops_per_s']:6.0f} hops/s  "
                   f"({r_rounds}+{r_warmup} rounds, {time.perf_counter() - t:.1f} s)", err=True)
    return results


def pool_passes(passes: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One result per configuration from several passes over the sweep: percentiles of all passes'
    samples together, mean throughput, and each pass's p50 (``p50_per_pass_ms``) to show the noise."""
    pooled = []
    for first in passes[0]:
        same = [r for rs in passes for r in rs if config_key(r) == config_key(first)]
        hop_ms = np.concatenate([np.asarray(r["per_hop_samples_ms"]) for r in same])
        r = {k: v for k, v in first.items() if k not in ("per_hop_samples_ms", "histogram_ms", "per_origin_p50_ms")}
        r["per_hop_ms"] = {**{f"p{q}": float(np.percentile(hop_ms, q)) for q in PERCENTILES},
                           "mean": float(hop_ms.mean()), "min": float(hop_ms.min()), "max": float(hop_ms.max())}
        r["samples"] = int(hop_ms.size)
        r["throughput_hops_per_s"] = float(np.mean([x["throughput_hops_per_s"] for x in same]))
        r["p50_per_pass_ms"] = [x["per_hop_ms"]["p50"] for x in same]
        r["lineage_at_end_per_pass"] = [x["lineage_at_end"] for x in same]
        r["passes"] = len(same)
        pooled.append(r)
    return pooled


def sweep_table(results: list[dict[str, Any]]) -> str:
    lines = [f"{'config':<26} {'ft':<13} {'recv':<6} {'delay':>6} {'f':>4} {'p50 ms':>8} {'p99 ms':>8} "
             f"{'hops/s':>7} {'rounds':>7} {'stash@end':>9} {'fwd mean':>8} {'store p50':>9} p50 per pass"]
    for r in results:
        lin = r.get("lineage_at_end") or {}
        nodes = list(lin.get("nodes", {}).values())
        stash = sum(n.get("stash_size", 0) for n in nodes) if nodes else None
        fwd = (sum(n.get("forwarded_mean", 0.0) for n in nodes) / len(nodes)) if nodes else None
        store = (sum(n.get("store_latency_ms_p50", 0.0) for n in nodes) / len(nodes)) if nodes else None
        f = "-" if not (r["ft"] == "lineage_stash" and r["nondeterministic"]) else (
            "inf" if r["max_forwards"] is None else str(r["max_forwards"]))
        recv = "-" if r["ft"] == "none" else ("nondet" if r["nondeterministic"] else "det")
        p = r["per_hop_ms"]
        per_pass = r.get("p50_per_pass_ms")
        lines.append(
            f"{r['label']:<26} {r['ft']:<13} {recv:<6} {r['store_delay_ms']:>6g} {f:>4} {p['p50']:>8.3f} "
            f"{p['p99']:>8.3f} {r['throughput_hops_per_s']:>7.0f} {r['rounds']:>7} "
            f"{'-' if stash is None else stash:>9} {'-' if fwd is None else f'{fwd:.2f}':>8} "
            f"{'-' if store is None else f'{store:.2f}':>9}"
            + (" " + "/".join(f"{x:.2f}" for x in per_pass) if per_pass and len(per_pass) > 1 else ""))
    return "\n".join(lines)


def ratios_text(ratios: dict[str, dict[str, Any]]) -> str:
    lines = []
    for r in ratios.values():
        verdict = "met" if r["met"] else "NOT met"
        per_pass = r.get("ratio_per_pass")
        spread = (f"; per pass {min(per_pass):.3f}-{max(per_pass):.3f}x" if per_pass and len(per_pass) > 1 else "")
        lines.append(f"{r['what']}: {r['ratio']:.3f}x (target <= {r['target_max']}x): {verdict}"
                     f" ({r['p50_ms'][0]:.3f} / {r['p50_ms'][1]:.3f} ms{spread})")
    return "\n".join(lines)


def plot_sweep(results: list[dict[str, Any]], params: dict[str, Any], path: Path) -> None:
    """Like the paper's Figure 10a-c: p50 (solid) and p99 (dotted) per-hop latency against the added
    store delay, one panel per receiver kind (and f), one line per mode; ft=none as a flat line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: list[tuple[str, bool, Any]] = []
    if any(r["ft"] != "none" and not r["nondeterministic"] for r in results):
        panels.append(("deterministic receivers", False, "any"))
    nondet_fs = []
    for r in results:
        if r["ft"] == "lineage_stash" and r["nondeterministic"] and r["max_forwards"] not in nondet_fs:
            nondet_fs.append(r["max_forwards"])
    if not nondet_fs and any(r["ft"] == "write_first" and r["nondeterministic"] for r in results):
        nondet_fs = [None]
    for f in nondet_fs:
        panels.append((f"nondeterministic receivers, f = {'unlimited' if f is None else f}", True, f))
    if not panels:
        panels.append(("", False, "any"))
    none = _find(results, "none")
    colors = {"lineage_stash": "tab:blue", "write_first": "tab:red"}
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.2), sharey=True, squeeze=False)
    for ax, (letter, (title, nondet, f)) in zip(axes[0], zip("abcdefgh", panels, strict=False), strict=False):
        for ft in ("lineage_stash", "write_first"):
            rs = [r for r in results if r["ft"] == ft and r["nondeterministic"] == nondet
                  and (f == "any" or ft == "write_first" or r["max_forwards"] == f)]
            rs.sort(key=lambda r: r["store_delay_ms"])
            if not rs:
                continue
            xs = [r["store_delay_ms"] for r in rs]
            name = {"lineage_stash": "lineage stash", "write_first": "WriteFirst"}[ft]
            ax.plot(xs, [r["per_hop_ms"]["p50"] for r in rs], "o-", color=colors[ft], label=f"{name} p50")
            ax.plot(xs, [r["per_hop_ms"]["p99"] for r in rs], "s:", color=colors[ft], alpha=0.6,
                    label=f"{name} p99")
        if none is not None:
            ax.axhline(none["per_hop_ms"]["p50"], color="grey", linestyle="--", linewidth=1,
                       label=f"ft=none p50 ({none['per_hop_ms']['p50']:.2f} ms)")
        ax.set_title(f"({letter}) {title}", fontsize=10)
        ax.set_xlabel("added lineage store latency (ms)")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    top = max(r["per_hop_ms"]["p99"] for r in results)
    axes[0][0].set_ylim(top=top * 4)  # room for the legends above the lines
    axes[0][0].set_ylabel("per-hop latency (ms)")
    fig.suptitle(f"Actor ring, {params['actors']} actors on {params['nodes']} nodes, "
                 f"{params['actors']} tokens in flight, {params.get('cores', '?')} cores", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def register_pickle_by_value(*modules: Any) -> None:
    """Node processes (and Ray workers) must unpickle the bench's classes wherever this file lives."""
    import cloudpickle

    for m in modules:
        if m.__name__ != "__main__":
            cloudpickle.register_pickle_by_value(m)


@click.command()
@click.option("--actors", default=8, show_default=True, help="actors in the ring (= tokens in flight)")
@click.option("--nodes", default=2, show_default=True, help="actorrt node processes (actor i on node i % nodes)")
@click.option("--rounds", default=None, type=int,
              help=f"measured rounds per token  [default: 300; {SWEEP_ROUNDS} with --sweep]")
@click.option("--warmup", default=None, type=int,
              help=f"warm-up rounds per token, discarded  [default: 30; {SWEEP_WARMUP} with --sweep]")
@click.option("--slow-rounds", default=None, type=int,
              help="measured rounds per token for write_first with a store delay > 0 (every hop waits "
                   "for the store)  [default: --rounds]")
@click.option("--out", "out_dir", default="bench/results", show_default=True, type=click.Path(file_okay=False),
              help="directory for the JSON and PNG")
@click.option("--peer", type=click.Choice(["ray"]), default=None,
              help="also run the ring on this system (single configuration only)")
@click.option("--ft", "ft_text", default=None,
              help="lineage logging, a list: lineage_stash, write_first, none (none = the runtime alone)  "
                   "[default: lineage_stash; all three with --sweep]")
@click.option("--receivers", type=click.Choice(["nondet", "det", "both"]), default=None,
              help="ring actors as nondeterministic and/or deterministic receivers  "
                   "[default: nondet; both with --sweep]")
@click.option("--deterministic", is_flag=True, help="shorthand for --receivers det")
@click.option("--store-delay-ms", "delay_text", default=None,
              help="added lineage store latency per ack, a list, e.g. 0,1,5  [default: 0; 0,1,5 with --sweep]")
@click.option("--max-forwards", "forwards_text", default=None,
              help="the paper's f, a list, e.g. none,8 (only lineage_stash with nondeterministic receivers)  "
                   "[default: none; none,8 with --sweep]")
@click.option("--sweep", is_flag=True,
              help="issue 3's grid (Figures 10a-c): --ft lineage_stash,write_first,none --receivers both "
                   f"--store-delay-ms 0,1,5 --max-forwards none,8 --rounds {SWEEP_ROUNDS} --warmup {SWEEP_WARMUP}; "
                   "options given explicitly override it")
@click.option("--repeat", default=1, show_default=True,
              help="passes over the configurations (alternating order), pooled per configuration")
@click.option("--timeout", default=120.0, show_default=True, help="seconds one ring may take")
@click.option("--hold", default=0.0, show_default=True,
              help="seconds to wait after start-up before the ring runs (to attach py-spy to the nodes)")
def main(actors: int, nodes: int, rounds: int | None, warmup: int | None, slow_rounds: int | None,
         out_dir: str, peer: str | None, ft_text: str | None, receivers: str | None, deterministic: bool,
         delay_text: str | None, forwards_text: str | None, sweep: bool, repeat: int, timeout: float,
         hold: float) -> None:
    """Per-hop latency of a ring of actors with P tokens in flight (actorrt, optionally vs Ray), for
    one lineage-logging configuration or a sweep of them."""
    rounds = rounds if rounds is not None else (SWEEP_ROUNDS if sweep else 300)
    warmup = warmup if warmup is not None else (SWEEP_WARMUP if sweep else 30)
    if actors < 2 or nodes < 1 or rounds < 1 or warmup < 0 or repeat < 1:
        raise click.BadParameter("need --actors >= 2, --nodes >= 1, --rounds >= 1, --warmup >= 0, --repeat >= 1")
    if deterministic and receivers not in (None, "det"):
        raise click.BadParameter("--deterministic contradicts --receivers " + receivers)
    fts = parse_list(ft_text or (",".join(FT_MODES) if sweep else "lineage_stash"), _mode, "--ft")
    receivers = "det" if deterministic else (receivers or ("both" if sweep else "nondet"))
    kinds = {"nondet": [True], "det": [False], "both": [False, True]}[receivers]
    delays = parse_list(delay_text or (",".join(f"{d:g}" for d in SWEEP_DELAYS_MS) if sweep else "0"),
                        _delay, "--store-delay-ms")
    forwards = parse_list(forwards_text or ("none,8" if sweep else "none"), _forwards, "--max-forwards")
    configs = build_configs(fts, kinds, delays, forwards)
    slow_rounds = slow_rounds if slow_rounds is not None else rounds
    slow_warmup = min(warmup, max(1, slow_rounds // 5)) if slow_rounds < rounds else warmup
    register_pickle_by_value(sys.modules[__name__])

    now = _dt.datetime.now()
    machine = {"cores": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
               "calibration_loop_s_before": _calibrate()}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if len(configs) > 1 or repeat > 1:
        if peer:
            raise click.BadParameter("--peer ray runs with a single configuration, not a sweep")
        _main_sweep(configs, actors, nodes, rounds, warmup, slow_rounds, slow_warmup, repeat, timeout, now,
                    machine, out)
        return
    c = configs[0]
    params = {"actors": actors, "nodes": nodes, "rounds": rounds, "warmup": warmup, "peer": peer,
              "ft": c["ft"], "nondeterministic": c["nondeterministic"], "store_delay_ms": c["store_delay_ms"],
              "max_forwards": c["max_forwards"],
              "mode": "fire-and-forget", "payload": "(origin:int, round:int)",
              "per_hop": "round-trip time measured in the origin actor / actors"}

    results = [run_actorrt(actors, nodes, rounds, warmup, timeout, hold, c["ft"], c["nondeterministic"],
                           c["store_delay_ms"], c["max_forwards"])]
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

    stem = f"ring-{now:%Y%m%d-%H%M%S}"
    doc = {"benchmark": "ring", "date": now.isoformat(timespec="seconds"), "machine": machine,
           "params": params, "results": results, "ratio_actorrt_over_ray": ratios,
           "targets": targets, "note": peer_note}
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1))
    _plot(results, params, out / f"{stem}.png")

    click.echo(f"ring: {actors} actors, {nodes} nodes, {rounds} rounds (+{warmup} warm-up) per token, "
               f"{machine['cores']} cores (calibration loop {machine['calibration_loop_s_before']:.2f} s before, "
               f"{machine['calibration_loop_s_after']:.2f} s after); {config_label(c)}")
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


def _main_sweep(configs: list[dict[str, Any]], actors: int, nodes: int, rounds: int, warmup: int,
                slow_rounds: int, slow_warmup: int, repeat: int, timeout: float, now: _dt.datetime,
                machine: dict[str, Any], out: Path) -> None:
    params = {"actors": actors, "nodes": nodes, "rounds": rounds, "warmup": warmup, "repeat": repeat,
              "slow_rounds": slow_rounds, "slow_warmup": slow_warmup,
              "slow_rounds_apply_to": "write_first with store delay > 0", "cores": machine["cores"],
              "mode": "fire-and-forget", "payload": "(origin:int, round:int)",
              "per_hop": "round-trip time measured in the origin actor / actors",
              "configs": [config_label(c) for c in configs]}
    t0 = time.perf_counter()
    passes = []
    for k in range(repeat):
        if repeat > 1:
            click.echo(f"pass {k + 1}/{repeat}", err=True)
        order = configs if k % 2 == 0 else configs[::-1]  # alternate, so drift hits every config alike
        passes.append(run_sweep(order, actors, nodes, rounds, warmup, slow_rounds, slow_warmup, timeout))
    machine["calibration_loop_s_after"] = _calibrate()
    results = pool_passes(passes) if repeat > 1 else passes[0]
    ratios = sweep_ratios(results)
    if repeat > 1:
        for name in ratios:
            ratios[name]["ratio_per_pass"] = [sweep_ratios(rs)[name]["ratio"] for rs in passes]
    stem = f"ring-sweep-{now:%Y%m%d-%H%M%S}"
    doc = {"benchmark": "ring-sweep", "date": now.isoformat(timespec="seconds"), "machine": machine,
           "params": params, "sweep_wall_s": time.perf_counter() - t0, "results": results,
           "passes": passes if repeat > 1 else None, "ratios": ratios}
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1))
    plot_sweep(results, params, out / f"{stem}.png")
    click.echo(f"ring sweep: {actors} actors, {nodes} nodes, {rounds} rounds (+{warmup} warm-up) per token"
               + (f", {repeat} passes pooled" if repeat > 1 else "")
               + (f" ({slow_rounds}+{slow_warmup} for write_first with a store delay)" if slow_rounds != rounds else "")
               + f", {machine['cores']} cores (calibration loop {machine['calibration_loop_s_before']:.2f} s before, "
               f"{machine['calibration_loop_s_after']:.2f} s after), {doc['sweep_wall_s']:.0f} s")
    click.echo(sweep_table(results))
    if ratios:
        click.echo("issue 3 targets (ratios of p50s in this run):")
        click.echo(ratios_text(ratios))
    click.echo(f"wrote {out / stem}.json and .png")


if __name__ == "__main__":
    main()
