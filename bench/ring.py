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
``--tls`` runs the ring a second time with mutual TLS between every process (a throwaway CA) and
prints TLS / plaintext per percentile. ``--store-replicas`` runs it again with a replica of every
store shard (each flush acked once the replica holds it) and with ``ft=none``, and prints what the
replicas cost per hop.

``--sweep`` (or lists for ``--ft``, ``--store-delay-ms``, ``--max-forwards``, ``--receivers both``)
runs one ring per lineage-logging configuration in one invocation, each on a fresh cluster, and
plots p50/p99 per hop against the added store latency (the paper's Figures 10a-c) with the
target ratios, which only mean something within one run: the machine is noisy.

Run: ``python bench/ring.py [--actors 8] [--nodes 2] [--rounds 400] [--warmup 50] [--peer ray] [--tls]``,
``python bench/ring.py --sweep [--slow-rounds 60]``.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
from pathlib import Path
from typing import Any

import click
import numpy as np
import ring_actors
from ring_actors import PERCENTILES, calibrate, ray_available, register_pickle_by_value, run_actorrt, run_ray
from ring_sweep import (
    FT_MODES,
    SWEEP_DELAYS_MS,
    SWEEP_ROUNDS,
    SWEEP_WARMUP,
    build_configs,
    config_label,
    main_sweep,
    parse_delay,
    parse_forwards,
    parse_list,
    parse_mode,
)
from tls_env import tls_environment

# Targets on the 2-core machine (8 actors, 2 nodes).
TARGET_P50_MS = 0.35
TARGET_RATIO_TO_RAY = 0.25


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


def _table(results: list[dict[str, Any]], ratios: dict[str, dict[str, float]]) -> str:
    cols = [f"p{p}" for p in PERCENTILES] + ["mean"]
    lines = [f"{'system':<11} " + " ".join(f"{c + ' ms':>9}" for c in cols) + f" {'hops/s':>9} {'samples':>8}"]
    for r in results:
        p = r["per_hop_ms"]
        lines.append(f"{r['system']:<11} " + " ".join(f"{p[c]:>9.3f}" for c in cols)
                     + f" {r['throughput_hops_per_s']:>9.0f} {r['samples']:>8}")
    for label, ratio in (ratios or {}).items():
        lines.append(f"{'ratio':<11} " + " ".join(f"{ratio.get(c, float('nan')):>8.3f}x" for c in cols)
                     + f"   ({label})")
    return "\n".join(lines)


# ---- sweeps over lineage-logging configurations (the paper's Figures 10a-c) ------------


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
              help="the grid (Figures 10a-c): --ft lineage_stash,write_first,none --receivers both "
                   f"--store-delay-ms 0,1,5 --max-forwards none,8 --rounds {SWEEP_ROUNDS} --warmup {SWEEP_WARMUP}; "
                   "options given explicitly override it")
@click.option("--repeat", default=1, show_default=True,
              help="passes over the configurations (alternating order), pooled per configuration")
@click.option("--timeout", default=120.0, show_default=True, help="seconds one ring may take")
@click.option("--hold", default=0.0, show_default=True,
              help="seconds to wait after start-up before the ring runs (to attach py-spy to the nodes)")
@click.option("--tls", is_flag=True,
              help="also run the ring with mutual TLS between all processes (single configuration only)")
@click.option("--store-replicas", "replicas", is_flag=True,
              help="also run the ring with a replica of every store shard, and with ft=none (single configuration)")
def main(actors: int, nodes: int, rounds: int | None, warmup: int | None, slow_rounds: int | None,
         out_dir: str, peer: str | None, ft_text: str | None, receivers: str | None, deterministic: bool,
         delay_text: str | None, forwards_text: str | None, sweep: bool, repeat: int, timeout: float,
         hold: float, tls: bool, replicas: bool) -> None:
    """Per-hop latency of a ring of actors with P tokens in flight (actorrt, optionally vs Ray), for
    one lineage-logging configuration or a sweep of them."""
    rounds = rounds if rounds is not None else (SWEEP_ROUNDS if sweep else 300)
    warmup = warmup if warmup is not None else (SWEEP_WARMUP if sweep else 30)
    if actors < 2 or nodes < 1 or rounds < 1 or warmup < 0 or repeat < 1:
        raise click.BadParameter("need --actors >= 2, --nodes >= 1, --rounds >= 1, --warmup >= 0, --repeat >= 1")
    if deterministic and receivers not in (None, "det"):
        raise click.BadParameter("--deterministic contradicts --receivers " + receivers)
    fts = parse_list(ft_text or (",".join(FT_MODES) if sweep else "lineage_stash"), parse_mode, "--ft")
    receivers = "det" if deterministic else (receivers or ("both" if sweep else "nondet"))
    kinds = {"nondet": [True], "det": [False], "both": [False, True]}[receivers]
    delays = parse_list(delay_text or (",".join(f"{d:g}" for d in SWEEP_DELAYS_MS) if sweep else "0"),
                        parse_delay, "--store-delay-ms")
    forwards = parse_list(forwards_text or ("none,8" if sweep else "none"), parse_forwards, "--max-forwards")
    configs = build_configs(fts, kinds, delays, forwards)
    slow_rounds = slow_rounds if slow_rounds is not None else rounds
    slow_warmup = min(warmup, max(1, slow_rounds // 5)) if slow_rounds < rounds else warmup
    register_pickle_by_value(ring_actors)

    now = _dt.datetime.now()
    machine = {"cores": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
               "calibration_loop_s_before": calibrate()}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if len(configs) > 1 or repeat > 1:
        if peer or tls or replicas:
            raise click.BadParameter("--peer ray, --tls and --store-replicas run with a single configuration, "
                                     "not a sweep")
        main_sweep(configs, actors, nodes, rounds, warmup, slow_rounds, slow_warmup, repeat, timeout, now,
                    machine, out)
        return
    c = configs[0]
    params = {"actors": actors, "nodes": nodes, "rounds": rounds, "warmup": warmup, "peer": peer,
              "ft": c["ft"], "nondeterministic": c["nondeterministic"], "store_delay_ms": c["store_delay_ms"],
              "max_forwards": c["max_forwards"], "tls": tls, "store_replicas": replicas,
              "mode": "fire-and-forget", "payload": "(origin:int, round:int)",
              "per_hop": "round-trip time measured in the origin actor / actors"}

    def ring(ft: str = c["ft"], store_replicas: int = 0) -> dict[str, Any]:
        return run_actorrt(actors, nodes, rounds, warmup, timeout, hold, ft, c["nondeterministic"],
                           c["store_delay_ms"], c["max_forwards"], store_replicas)

    results = [ring()]
    if tls:
        with tls_environment():
            results.append({**ring(), "system": "actorrt+tls"})
    if replicas:
        results.append({**ring(store_replicas=1), "system": "actorrt+replicas"})
        results.append({**ring(ft="none"), "system": "actorrt ft=none"})
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

    machine["calibration_loop_s_after"] = calibrate()
    by_system = {r["system"]: r["per_hop_ms"] for r in results}

    def ratio(over: str, under: str) -> dict[str, float] | None:
        if over not in by_system or under not in by_system:
            return None
        a, b = by_system[over], by_system[under]
        return {k: a[k] / b[k] for k in a if k in ("p50", "p90", "p99", "mean")}

    ratios = ratio("actorrt", "ray")
    tls_ratios = ratio("actorrt+tls", "actorrt")
    replica_ratios = ratio("actorrt+replicas", "actorrt")
    ft_ratios = ratio("actorrt", "actorrt ft=none")
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
           "ratio_tls_over_plaintext": tls_ratios, "ratio_replicas_over_none": replica_ratios,
           "ratio_ft_over_none": ft_ratios, "targets": targets, "note": peer_note}
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1))
    _plot(results, params, out / f"{stem}.png")

    click.echo(f"ring: {actors} actors, {nodes} nodes, {rounds} rounds (+{warmup} warm-up) per token, "
               f"{machine['cores']} cores (calibration loop {machine['calibration_loop_s_before']:.2f} s before, "
               f"{machine['calibration_loop_s_after']:.2f} s after); {config_label(c)}")
    shown = {label: r for label, r in (("actorrt / ray", ratios), ("tls / plaintext", tls_ratios),
                                       ("replicas / no replicas", replica_ratios), ("ft / none", ft_ratios)) if r}
    click.echo(_table(results, shown))
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
