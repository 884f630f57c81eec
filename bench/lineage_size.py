"""Forwarded lineage per task against task duration (the paper's Figure 11).

A ring of P nondeterministic actors on N nodes (actor ``i`` on node ``i % N``, as in ``ring.py``,
whose driver and actor this reuses) with ``--tokens`` tokens circulating (default 1). Every ``hop``
task first busy-waits for the task duration ``d`` (it holds its node's event loop, like CPU work),
then submits the next hop fire-and-forget (``--work busy``). Lineage mode is ``lineage_stash``, so every submission
carries the part of its uncommitted lineage the receiving node has not been sent, and
``actorrt.stats()`` reports per node the lineage forwarded per submitted task (mean and median over
that node's last 10,000 submissions).

For each (d, store delay) pair a fresh cluster runs the ring for ``--seconds`` and reports the
forwarded lineage at the end, the per-hop latency (with one token: the spacing of tasks along the
chain), the store's write latency and the stash size sampled every second. The paper's claim: once
tasks are spaced further apart than the store's latency, the forwarded lineage is small and flat.
``--long TASK_MS:DELAY_MS`` runs one setting for ``--long-s`` seconds and records the statistics
every second, to show whether the forwarded lineage and the stash stay flat or grow.

``--work sleep`` makes a hop ``await asyncio.sleep(d)`` instead, which leaves the node's event loop
(and so its flusher and acks) free while the task "runs"; ``--work busy,sleep`` (default) does both.

Run: ``python bench/lineage_size.py [--durations 0,0.5,1,2,5,10] [--work busy,sleep]
[--store-delay-ms 1,5] [--seconds 3] [--long 5:1:busy,5:1:sleep] [--long-s 40]``.
"""

from __future__ import annotations

import asyncio
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
import ring_actors  # bench/ is not a package: run as a script, its folder is on sys.path
import ring_sweep

NEVER = 10**9  # rounds: tokens stop on a deadline instead
WINDOW = 10_000  # actorrt keeps the sizes of each node's last 10,000 forwarded lineages


class WorkRingActor(ring_actors.RingActor):
    """A ring member whose every hop first works (busy-waits) for ``task_ms``; a token stops at its
    origin once ``run_s`` seconds have passed since ``start``."""

    def __init__(self, index: int, size: int, task_ms: float, run_s: float) -> None:
        super().__init__(index, size, NEVER)
        self.task_s = task_ms / 1e3
        self.run_s = run_s
        self.deadline = float("inf")

    def start(self) -> None:
        self.deadline = time.perf_counter() + self.run_s
        super().start()

    def hop(self, origin: int, rnd: int) -> None:
        if self.task_s > 0:
            end = time.perf_counter() + self.task_s
            while time.perf_counter() < end:
                pass
        self._pass_on(origin, rnd)

    def _pass_on(self, origin: int, rnd: int) -> None:
        if origin == self.index and time.perf_counter() >= self.deadline:
            self.total_rounds = rnd + 1  # this round is the last: RingActor.hop reports to the collector
        ring_actors.RingActor.hop(self, origin, rnd)


class SleepRingActor(WorkRingActor):
    """The same, but a hop sleeps (``asyncio.sleep``) instead of working: the node's event loop, which
    also runs the flusher and the acks, stays free. uvloop's timers have 1 ms resolution, so sub-ms
    durations round (0.5 ms sleeps ~0): read the measured hop latency, not the nominal d."""

    async def hop(self, origin: int, rnd: int) -> None:  # type: ignore[override]
        if self.task_s > 0:
            await asyncio.sleep(self.task_s)
        self._pass_on(origin, rnd)


WORK_CLASSES = {"busy": WorkRingActor, "sleep": SleepRingActor}


SETUP_TASKS = 3  # __init__, ready, set_next: a ring actor runs these without submitting anything


def _node_sample(stats: dict[str, Any], t: float) -> dict[str, Any]:
    """Per node: its lineage statistics, the tasks its ring actors executed and, from those, the
    nondeterministic submissions it made (each hop and each start submits one hop)."""
    nodes = {}
    names = {c.__name__ for c in WORK_CLASSES.values()}
    for n in stats["nodes"]:
        actors_here = [a for a in n.get("actors", []) if a["class"] in names]
        executed = sum(a["executed"] for a in actors_here)
        nodes[str(n["node"])] = {**n.get("lineage", {}), "executed": executed,
                                 "submitted": max(0, executed - SETUP_TASKS * len(actors_here))}
    return {"t_s": round(t, 3), "nodes": nodes}


def _mean_over_nodes(sample: dict[str, Any], key: str) -> float:
    vals = [n.get(key, 0.0) for n in sample["nodes"].values()]
    return float(np.mean(vals)) if vals else float("nan")


def interval_forwarded(samples: list[dict[str, Any]]) -> list[float | None]:
    """Forwarded lineage per task within each sampling interval, averaged over nodes: exact while a
    node has made at most ``WINDOW`` submissions (its mean then covers all of them: sum = mean * n),
    else None (only the windowed mean is known)."""
    out: list[float | None] = []
    prev: dict[str, tuple[float, int]] = {}
    for s in samples:
        vals = []
        for node, n in s["nodes"].items():
            count = n.get("submitted", 0)
            total = n.get("forwarded_mean", 0.0) * count
            p = prev.get(node)
            prev[node] = (total, count)
            if p is None or count > WINDOW or count <= p[1]:
                continue
            vals.append((total - p[0]) / (count - p[1]))
        out.append(float(np.mean(vals)) if vals else None)
    return out


def run_config(actors: int, nodes: int, tokens: int, task_ms: float, store_delay_ms: float,
               max_forwards: int | None, run_s: float, sample_s: float, work: str = "busy") -> dict[str, Any]:
    """One ring on a fresh cluster; stats sampled every ``sample_s`` seconds during the run."""
    import actorrt

    actorrt.init(num_nodes=nodes, ft="lineage_stash", store_delay_ms=store_delay_ms, max_forwards=max_forwards)
    samples: list[dict[str, Any]] = []
    next_sample = [sample_s]

    def on_poll(elapsed: float) -> None:
        if elapsed >= next_sample[0]:
            samples.append(_node_sample(actorrt.stats(), elapsed))
            next_sample[0] += sample_s

    try:
        work_cls = actorrt.remote(WORK_CLASSES[work])
        coll_cls = actorrt.remote(ring_actors.Collector)
        times, wall = ring_actors.drive(
            lambda i: work_cls.options(node=i % nodes, nondeterministic=True).remote(i, actors, task_ms, run_s),
            lambda: coll_cls.options(node=0, nondeterministic=False).remote(),
            lambda refs, t: actorrt.get(refs, timeout=t),
            actors, NEVER, run_s + 120.0, tokens=tokens, on_poll=on_poll,
        )
        time.sleep(ring_actors.SETTLE_S + store_delay_ms / 1e3)
        end = _node_sample(actorrt.stats(), wall)
    finally:
        actorrt.shutdown()
    warmup = 2 if min(len(t) for t in times if t) > 4 else 0
    summary = ring_actors.summary(times, actors, warmup)
    hops = sum(len(t) for t in times) * actors
    fwd_mean = _mean_over_nodes(end, "forwarded_mean")
    return {
        "work": work, "task_ms": task_ms, "store_delay_ms": store_delay_ms, "max_forwards": max_forwards,
        "tokens": tokens, "run_s": run_s, "wall_s": wall,
        "tasks_per_s": hops / wall,
        "per_hop_ms": summary["per_hop_ms"],
        "forwarded_mean": fwd_mean,
        "forwarded_median": _mean_over_nodes(end, "forwarded_median"),
        "store_latency_ms_p50": _mean_over_nodes(end, "store_latency_ms_p50"),
        "stash_size_end": sum(n.get("stash_size", 0) for n in end["nodes"].values()),
        "stash_size_max_sampled": max((sum(n.get("stash_size", 0) for n in s["nodes"].values()) for s in samples),
                                      default=None),
        "end": end, "samples": samples,
        "forwarded_per_interval": interval_forwarded(samples),
    }


def _parse_long(text: str) -> list[tuple[float, float, str]]:
    out = []
    for part in ring_sweep.parse_list(text, str, "--long"):
        bits = part.split(":")
        try:
            if len(bits) not in (2, 3):
                raise ValueError
            work = bits[2] if len(bits) == 3 else "busy"
            if work not in WORK_CLASSES:
                raise ValueError
            out.append((ring_sweep.parse_delay(bits[0]), ring_sweep.parse_delay(bits[1]), work))
        except ValueError:
            raise click.BadParameter(f"--long: {part!r} is not TASK_MS:DELAY_MS[:busy|sleep]") from None
    return out


def _stash_total(sample: dict[str, Any]) -> int:
    return sum(n.get("stash_size", 0) for n in sample["nodes"].values())


def _table(results: list[dict[str, Any]]) -> str:
    lines = [f"{'work':<5} {'task ms':>7} {'delay ms':>8} {'hop p50 ms':>10} {'tasks/s':>8} {'store p50 ms':>12} "
             f"{'fwd mean':>8} {'fwd median':>10} {'flushed/task':>12} {'stash max':>9} {'stash end':>9}"]
    for r in results:
        nodes = r["end"]["nodes"].values()
        per_task = sum(n.get("flushed", 0) for n in nodes) / max(1, sum(n.get("submitted", 0) for n in nodes))
        lines.append(f"{r['work']:<5} {r['task_ms']:>7g} {r['store_delay_ms']:>8g} {r['per_hop_ms']['p50']:>10.3f} "
                     f"{r['tasks_per_s']:>8.0f} {r['store_latency_ms_p50']:>12.2f} {r['forwarded_mean']:>8.2f} "
                     f"{r['forwarded_median']:>10.1f} {per_task:>12.1f} {str(r['stash_size_max_sampled']):>9} "
                     f"{r['stash_size_end']:>9}")
    return "\n".join(lines)


def _long_summary(lr: dict[str, Any]) -> str:
    fwd = [_mean_over_nodes(s, "forwarded_mean") for s in lr["samples"]]
    iv = [x for x in lr["forwarded_per_interval"] if x is not None]
    stash = [_stash_total(s) for s in lr["samples"]]
    if not fwd:
        return f"long run {lr['work']} d={lr['task_ms']:g} ms +{lr['store_delay_ms']:g} ms: no samples"
    third = max(1, len(fwd) // 3)
    text = (f"long run {lr['work']} d={lr['task_ms']:g} ms +{lr['store_delay_ms']:g} ms, {len(fwd)} samples: "
            f"fwd/task (window) first third {np.mean(fwd[:third]):.2f}, last third {np.mean(fwd[-third:]):.2f}")
    if iv:
        text += f"; per 1-s interval min {min(iv):.1f} median {np.median(iv):.1f} max {max(iv):.1f}"
    return text + (f"; stash (all nodes) median {np.median(stash):.0f} max {max(stash)}, "
                   f"{lr['stash_size_end']} after the run")


def _plot(results: list[dict[str, Any]], longs: list[dict[str, Any]], params: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    ncols = 3 if longs else 2
    fig, axes = plt.subplots(1, ncols, figsize=(5.2 * ncols, 4.4))
    delays = sorted({r["store_delay_ms"] for r in results})
    styles = {"busy": ("o-", "busy-wait"), "sleep": ("s--", "sleep")}
    for work in [w for w in WORK_CLASSES if any(r["work"] == w for r in results)]:
        for k, delay in enumerate(delays):
            rs = sorted((r for r in results if r["store_delay_ms"] == delay and r["work"] == work),
                        key=lambda r: r["task_ms"])
            if not rs:
                continue
            style, name = styles[work]
            label = f"{name}, +{delay:g} ms store"
            axes[0].plot([r["task_ms"] for r in rs], [r["forwarded_mean"] for r in rs], style, color=f"C{k}",
                         label=label)
            spacing = [r["per_hop_ms"]["p50"] / r["store_latency_ms_p50"] if r["store_latency_ms_p50"] else np.nan
                       for r in rs]
            axes[1].plot(spacing, [r["forwarded_mean"] for r in rs], style, color=f"C{k}", label=label)
    axes[0].set_xscale("symlog", linthresh=0.5)
    axes[0].set_xticks(sorted({r["task_ms"] for r in results}))
    axes[0].xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    axes[0].xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axes[0].set_xlabel("task duration d (ms)")
    axes[0].set_ylabel("forwarded lineage per submitted task (specs, mean)")
    axes[0].set_title("(a) forwarded lineage vs task duration", fontsize=10)
    axes[1].set_xscale("log")
    axes[1].xaxis.set_major_locator(matplotlib.ticker.FixedLocator([0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20]))
    axes[1].xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    axes[1].xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axes[1].axvline(1.0, color="grey", linestyle=":", linewidth=1, label="spacing = store latency")
    axes[1].set_xlabel("task spacing / store latency (hop p50 / store write p50)")
    axes[1].set_title("(b) against measured task spacing", fontsize=10)
    top = max([r["forwarded_mean"] for r in results] + [1.0]) * 3
    for ax in axes[:2]:
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_ylim(0, top)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    if longs:
        ax = axes[2]
        ax2 = ax.twinx()
        for k, lr in enumerate(longs):
            ts = [s["t_s"] for s in lr["samples"]]
            iv = lr["forwarded_per_interval"]
            name = f"{lr['work']} d={lr['task_ms']:g} ms +{lr['store_delay_ms']:g} ms"
            ax.plot(ts, [np.nan if x is None else x for x in iv], "-", color=f"C{k + 3}",
                    label=f"{name}: fwd/task per 1-s interval")
            ax2.plot(ts, [_stash_total(s) for s in lr["samples"]], ":", color=f"C{k + 3}", alpha=0.8,
                     label=f"{name}: stash")
        ax.set_xlabel("time in the run (s)")
        ax.set_ylabel("forwarded lineage per task in each second (solid)")
        ax2.set_ylabel("specs stashed, all nodes, sampled (dotted)")
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_ylim(bottom=0)
        ax2.set_ylim(bottom=0)
        ax.set_title("(c) over long runs, sampled every second", fontsize=10)
        ax.grid(True, alpha=0.3)
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=6, loc="upper left")
    fig.suptitle(f"Forwarded lineage: ring of {params['actors']} nondeterministic actors on {params['nodes']} "
                 f"nodes, {params['tokens']} token(s), f = {params['max_forwards'] or 'unlimited'}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@click.command()
@click.option("--actors", default=8, show_default=True, help="actors in the ring")
@click.option("--nodes", default=2, show_default=True, help="node processes (actor i on node i % nodes)")
@click.option("--tokens", default=1, show_default=True, help="tokens circulating at once")
@click.option("--durations", "durations_text", default="0,0.5,1,2,5,10", show_default=True,
              help="task durations d in ms, a list")
@click.option("--work", "work_text", default="busy,sleep", show_default=True,
              help="what a task does for d ms: busy (busy-wait: holds the node's event loop) and/or sleep "
                   "(asyncio.sleep: the loop stays free)")
@click.option("--store-delay-ms", "delay_text", default="1,5", show_default=True,
              help="added lineage store latency per ack, a list")
@click.option("--max-forwards", "forwards_text", default="none", show_default=True, help="the paper's f")
@click.option("--seconds", default=3.0, show_default=True, help="run time per (work, d, delay) configuration")
@click.option("--long", "long_text", default="5:1:busy,5:1:sleep", show_default=True,
              help="TASK_MS:DELAY_MS[:busy|sleep] settings to run for --long-s seconds each, sampling "
                   "actorrt.stats() every second (empty: none)")
@click.option("--long-s", default=40.0, show_default=True, help="seconds of each long run")
@click.option("--out", "out_dir", default="bench/results", show_default=True, type=click.Path(file_okay=False))
def main(actors: int, nodes: int, tokens: int, durations_text: str, work_text: str, delay_text: str,
         forwards_text: str, seconds: float, long_text: str, long_s: float, out_dir: str) -> None:
    """Forwarded lineage per task vs task duration, per store delay, plus long runs over time."""
    if actors < 2 or nodes < 1 or not 1 <= tokens <= actors or seconds <= 0:
        raise click.BadParameter("need --actors >= 2, --nodes >= 1, 1 <= --tokens <= --actors, --seconds > 0")
    durations = ring_sweep.parse_list(durations_text, ring_sweep.parse_delay, "--durations")
    delays = ring_sweep.parse_list(delay_text, ring_sweep.parse_delay, "--store-delay-ms")
    works = ring_sweep.parse_list(work_text, str, "--work")
    if any(w not in WORK_CLASSES for w in works):
        raise click.BadParameter(f"--work: each of {', '.join(WORK_CLASSES)}")
    max_forwards = ring_sweep.parse_list(forwards_text, ring_sweep.parse_forwards, "--max-forwards")[0]
    longs_cfg = _parse_long(long_text) if long_text.strip() else []
    ring_actors.register_pickle_by_value(ring_actors, sys.modules[__name__])

    now = _dt.datetime.now()
    machine = {"cores": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
               "calibration_loop_s_before": ring_actors.calibrate()}
    params = {"actors": actors, "nodes": nodes, "tokens": tokens, "durations_ms": durations, "work": works,
              "store_delays_ms": delays, "max_forwards": max_forwards, "seconds": seconds,
              "long": longs_cfg, "long_s": long_s, "ft": "lineage_stash", "receivers": "nondeterministic",
              "task": "d ms of busy-wait or asyncio.sleep in every hop, then a fire-and-forget submission",
              "forwarded": "per node: mean/median over its last 10,000 submissions; averaged over nodes"}
    t0 = time.perf_counter()
    results = []
    total = len(works) * len(delays) * len(durations)
    for work in works:
        for delay in delays:
            for d in durations:
                t = time.perf_counter()
                r = run_config(actors, nodes, tokens, d, delay, max_forwards, seconds, 1.0, work)
                results.append(r)
                click.echo(f"[{len(results)}/{total}] {work} d={d:g} ms +{delay:g} ms: fwd/task mean "
                           f"{r['forwarded_mean']:.2f} median {r['forwarded_median']:.1f}, hop p50 "
                           f"{r['per_hop_ms']['p50']:.3f} ms, store p50 {r['store_latency_ms_p50']:.2f} ms, "
                           f"stash end {r['stash_size_end']} ({time.perf_counter() - t:.1f} s)", err=True)
    longs = []
    for d, delay, work in longs_cfg:
        click.echo(f"long run: {work} d={d:g} ms, +{delay:g} ms, {long_s:g} s", err=True)
        longs.append(run_config(actors, nodes, tokens, d, delay, max_forwards, long_s, 1.0, work))
    machine["calibration_loop_s_after"] = ring_actors.calibrate()

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"lineage-size-{now:%Y%m%d-%H%M%S}"
    doc = {"benchmark": "lineage_size", "date": now.isoformat(timespec="seconds"), "machine": machine,
           "params": params, "wall_s": time.perf_counter() - t0, "results": results, "long_runs": longs}
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1))
    _plot(results, longs, params, out / f"{stem}.png")

    click.echo(f"lineage size: {actors} nondeterministic actors, {nodes} nodes, {tokens} token(s), "
               f"f = {max_forwards or 'unlimited'}, {seconds:g} s per config, {machine['cores']} cores "
               f"(calibration loop {machine['calibration_loop_s_before']:.2f} s before, "
               f"{machine['calibration_loop_s_after']:.2f} s after), {doc['wall_s']:.0f} s")
    click.echo(_table(results))
    for lr in longs:
        click.echo(_long_summary(lr))
    click.echo(f"wrote {out / stem}.json and .png")


if __name__ == "__main__":
    main()
