"""Sweeps of the ring over fault-tolerance configurations (the paper's Figures 10a-c).

One ring per configuration, each on a fresh cluster, in one invocation, and the target ratios of
two p50s measured in the same run (the machine is shared and noisy: ratios across runs mean little).
"""

from __future__ import annotations

import datetime as _dt
import json
import time
from pathlib import Path
from typing import Any

import click
import numpy as np
from ring_actors import PERCENTILES, calibrate, run_actorrt

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
    "nondet_ls_over_none_0ms": 1.6,
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


def parse_delay(text: str) -> float:
    v = float(text)
    if v < 0:
        raise ValueError("must be >= 0")
    return v


def parse_forwards(text: str) -> int | None:
    if text.lower() in ("none", "inf", "unlimited"):
        return None
    v = int(text)
    if v < 0:
        raise ValueError("must be >= 0 or none")
    return v


def parse_mode(text: str) -> str:
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
        "nondet_ls_over_none_0ms": (_find(results, "lineage_stash", True, 0.0, None)
                                    or _find(results, "lineage_stash", True, 0.0), _find(results, "none"),
                                    "nondeterministic lineage stash (f unlimited) at +0 ms p50 / ft=none p50"),
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
             f"{'hops/s':>7} {'rounds':>7} {'stash@end':>9} {'fwd mean':>8} {'store p50':>9} {'B/task':>7} "
             "p50 per pass"]
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
            f"{'-' if store is None else f'{store:.2f}':>9} {r.get('store_bytes_per_task', 0):>7.0f}"
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


def main_sweep(configs: list[dict[str, Any]], actors: int, nodes: int, rounds: int, warmup: int,
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
    machine["calibration_loop_s_after"] = calibrate()
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
        click.echo("targets (ratios of p50s in this run):")
        click.echo(ratios_text(ratios))
    click.echo(f"wrote {out / stem}.json and .png")
