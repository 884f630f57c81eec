"""Standby actors against today's recovery, a global rollback and Bytewax: how fast a failed
streaming operator is back, what its failure costs the rest, and what a standby costs without one.

Four modes, each on the streaming wordcount of ``streaming.py`` (a paced source, 2 splitters, 2
counts, a sink measuring latency), with node 1 (a splitter and a count) SIGKILLed at half time:

- ``standby``: the lineage stash with ``Dataflow(standby=1)``: the killed operators move to their
  standbys on node 0, which hold their newest checkpoints loaded;
- ``restart``: the lineage stash without standbys: node 1 restarts and replays its operators;
- ``rollback``: ``ft="global_rollback"``, a global checkpoint every ``--checkpoint-every`` s, every
  operator back to the last one;
- ``bytewax``: its one process SIGKILLed and restarted at once from its last snapshot.

Part (w), for each mode (``--repeat`` runs, the modes in turn; the medians are reported):
- recovery time as Clonos measures it: from the kill until latency is back within 10% (or 1 ms)
  of before: the first 50 ms step after the kill from which the lines scheduled in the next
  second have a mean latency within that bound;
- the time until the recovered count instance's first new output after the kill;
- the mean latency of the lines scheduled from the last checkpoint before the kill to 3 s after;
- throughput on a path the failure does not touch: a driver calling an actor on node 0 in a
  loop, calls per second in the 2 s after the kill against the 2 s before.

Part (s): one keyed fold holding ``--state-mb`` of state (1 MB per key), paced updates, its node
killed once the standby holds a checkpoint: the time from the kill until its first new output,
``standby`` against ``restart`` (which reads and unpickles the checkpoint after its restart).

Part (f): the failure-free cost of keeping standbys: the wordcount over a list, as fast as it
goes, operators checkpointing every 1,000 tasks, with and without standbys (alternated, twice).

Run: ``python bench/standby.py [--parts w,s,f] [--quick]``. Writes ``bench/results/standby-<time>``
``.json`` and ``.png`` (latency around the kill for the four modes; the 1 GB state's first
output) and prints the tables with the targets.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click
import numpy as np
from rich.progress import Progress
from run_meta import run_meta
from streaming import RESULTS, PacedSource, Run, line, recovery, run_actorrt, run_peer, timeline

import actorrt
from actorrt.streaming import Dataflow, ListSource

TARGETS = {  # (ratio, at most / at least)
    "recovery_time_standby_over_bytewax": (0.2, "<="),
    "recovery_time_standby_over_restart": (0.15, "<="),
    "state_first_output_standby_over_restart": (0.1, "<="),
    "mean_latency_during_standby_over_rollback": (0.05, "<="),
    "failure_free_throughput_standby_over_no_standby": (0.9, ">="),
    "failure_free_throughput_standby_over_ft_none": (None, ">="),  # no target: the cost of logging beside it
}
MODES = ("standby", "restart", "rollback", "bytewax")
BUCKET_S = 0.05
STEADY_S = 1.0
KILL_AFTER_S = 4.0  # (s): from a checkpoint of the whole state to the kill


# ---- (w) the wordcount through a kill ---------------------------------------------------------

def run_mode(mode: str, rate: float, seconds: float, checkpoint_every: float, operator_every: int,
             peer_python: str, nodes: int) -> Run:
    if mode == "bytewax":
        run = run_peer("bytewax", peer_python, rate, seconds, True, checkpoint_every)
    else:
        run = run_actorrt("global_rollback" if mode == "rollback" else "lineage_stash", rate, seconds, True,
                          checkpoint_every, standby=int(mode == "standby"), operator_checkpoint_every=operator_every,
                          probe=True, num_nodes=nodes)
    run.system = mode
    return run


def untouched(run: Run, window: float = 2.0) -> float:
    """Calls per second of the untouched path in ``window`` s after the kill, over those before."""
    if not run.probes or run.killed_at is None:
        return float("nan")
    t, kill = np.array(run.probes), run.killed_at
    before = np.sum((t >= kill - window) & (t < kill))
    after = np.sum((t >= kill) & (t < kill + window))
    return float(after / before) if before else float("nan")


def recovery_time(run: Run, before_ms: float) -> float:
    """s from the kill until the mean latency of the lines scheduled in the next ``STEADY_S`` is
    within 10% (or 1 ms) of ``before_ms``, in ``BUCKET_S`` steps."""
    if run.killed_at is None or not run.samples or not np.isfinite(before_ms):
        return float("nan")
    scheduled = np.array([emitted - lat for emitted, lat in run.samples])
    latency = np.array([lat for _, lat in run.samples]) * 1e3
    bound = max(before_ms * 1.1, before_ms + 1.0)
    for t in np.arange(run.killed_at, scheduled.max() - STEADY_S, BUCKET_S):
        next_second = latency[(scheduled >= t) & (scheduled < t + STEADY_S)]
        if len(next_second) and next_second.mean() <= bound:
            return float(t - run.killed_at)
    return float("nan")  # not within the run


def summarize(run: Run, checkpoint_every: float) -> dict[str, Any]:
    rec = recovery(run, checkpoint_every, BUCKET_S)  # the level before, and the mean during
    rec["recovery_s"] = recovery_time(run, rec.get("baseline_ms", float("nan")))
    counts = {w: s for w, s in run.first_outputs.items() if "count" in w or run.system == "bytewax"}
    return {"mode": run.system, "exact": run.exact, "killed_at": run.killed_at, "note": run.note,
            "recovery_s": rec.get("recovery_s", float("nan")), "baseline_ms": rec.get("baseline_ms", float("nan")),
            "mean_latency_during_ms": rec.get("mean_latency_during_ms", float("nan")),
            # the recovered instance is the count whose first new output came last
            "first_output_s": max(counts.values(), default=float("nan")), "first_outputs": run.first_outputs,
            "untouched_after_over_before": untouched(run), "recoveries": run.recoveries,
            "timeline": timeline(run, BUCKET_S)}


def _median(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A mode's runs as one: the median of each measure; the timeline and the recoveries of the
    run whose recovery time is the median."""
    middle = sorted(rows, key=lambda r: np.nan_to_num(r["recovery_s"], nan=np.inf))[len(rows) // 2]
    out = dict(middle, runs=len(rows), exact=all(r["exact"] for r in rows))
    for key in ("recovery_s", "baseline_ms", "mean_latency_during_ms", "first_output_s", "untouched_after_over_before"):
        out[key] = float(np.nanmedian([r[key] for r in rows]))
    return out


# ---- (s) a fold with a large state ------------------------------------------------------------

class Updates:
    """A sink writing each update's key, count and the time it was written (not exactly-once:
    the first write of an update is when it was first seen)."""

    exactly_once = False

    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, writer: str, number: int, records: list[tuple[int, int]]) -> None:
        now = time.time()
        with open(self.path, "a") as f:
            f.write("".join(f"{key} {n} {now:.6f}\n" for key, n in records))


def _big(key_mb: int):
    def init() -> tuple[None, int]:
        return None, 0

    def add(state: tuple[Any, int], record: tuple[float, int]) -> tuple[Any, int]:
        block, n = state
        return (block if block is not None else np.ones(key_mb << 20, dtype=np.uint8)), n + 1
    return init, add


def run_state(mode: str, state_mb: int, rate: float, seconds: float, every: int) -> dict[str, Any]:
    """One run of part (s): returns the time from the kill to the fold's first new output."""
    checkpoints = Path(tempfile.mkdtemp(prefix="actorrt-bench-ckpt-"))
    actorrt.init(num_nodes=2, checkpoint_dir=str(checkpoints))
    out = Path(tempfile.mkdtemp(prefix="actorrt-bench-state-")) / "updates"
    try:
        keys = state_mb  # 1 MB each
        t0 = time.time() + 1.0
        flow = Dataflow("state", batch_size=max(1, int(rate / 100)), max_in_flight=8, checkpoint_every=every,
                        standby=int(mode == "standby"))
        init, add = _big(1)
        (flow.source(PacedSource(rate, seconds, t0, record=lambda i: i % keys))
         .key_by(lambda record: record[1])
         .fold(init, add, name="big")
         .map(lambda update: (update[0], update[1][1]))  # in the fold's stage: the counts leave it, not the blocks
         .sink(Updates(str(out))))
        running = flow.start()
        # The kill: KILL_AFTER_S after a checkpoint of the whole state is written (by then the
        # standby has loaded it), the same in both modes, so both replay about as many tasks.
        node, written = _fold_node(), None
        while time.time() < t0 + seconds * 0.7 and written is None:
            written = _whole_checkpoint(checkpoints, state_mb)
            time.sleep(0.1)
        time.sleep(max(0.0, (written or time.time()) + KILL_AFTER_S - time.time()))
        ready = written is not None and (mode != "standby" or _standby_seq(1 - node) > 0)
        killed = time.time()
        actorrt.kill_node(node)
        noticed = time.time()  # what is written from now on comes from the fold's new incarnation
        running.finish(timeout=seconds + 120)
        recoveries = [r for n in actorrt.stats()["nodes"] for r in n["recoveries"]]
        seen: set[tuple[str, str]] = set()
        first_new = float("nan")
        for row in out.read_text().splitlines():
            key, n, at = row.split()
            if float(at) > noticed and (key, n) not in seen:
                first_new = float(at) - killed
                break
            seen.add((key, n))
        return {"mode": mode, "first_output_s": first_new, "state_mb": state_mb, "ready": ready,
                "recoveries": recoveries}
    finally:
        actorrt.shutdown()


def _fold_node() -> int:
    """The node hosting the fold (waiting until its actor reports)."""
    for _ in range(200):
        for node in actorrt.stats()["nodes"]:
            if any("big" in a["label"] for a in node["actors"]):
                return node["node"]
        time.sleep(0.1)
    raise RuntimeError("the fold operator did not start")


def _whole_checkpoint(directory: Path, state_mb: int) -> float | None:
    """When a checkpoint file of the whole state was written, if one was."""
    times = [p.stat().st_mtime for p in directory.rglob("*.ckpt") if p.stat().st_size >= state_mb << 20]
    return min(times, default=None)


def _standby_seq(node: int) -> int:
    """The newest checkpoint a standby copy on ``node`` holds loaded (0: none)."""
    copies = next(n for n in actorrt.stats()["nodes"] if n["node"] == node)["standby_copies"]
    return max(copies.values(), default=0)


# ---- (f) failure-free cost --------------------------------------------------------------------

def run_throughput(standby: int, lines: int, ft: str = "lineage_stash") -> float:
    """Lines per second of the wordcount over a list, operators checkpointing every 1,000 tasks."""
    actorrt.init(num_nodes=2, ft=ft, checkpoint_dir=tempfile.mkdtemp(prefix="actorrt-bench-ckpt-"))
    try:
        text = [line(i) for i in range(lines)]
        flow = Dataflow("wordcount", batch_size=20, max_in_flight=8, checkpoint_every=1000, standby=standby)
        (flow.source(ListSource(text))
         .flat_map(str.split, parallelism=2)
         .key_by(lambda word: word)
         .fold(lambda: 0, lambda n, word: n + 1, parallelism=2, emit="final")
         .collect())
        started = time.perf_counter()
        flow.run(timeout=600)
        return lines / (time.perf_counter() - started)
    finally:
        actorrt.shutdown()


# ---- report -----------------------------------------------------------------------------------

def _plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(14, 4.5), gridspec_kw={"width_ratios": [3, 1]})
    for row in doc.get("w", []):
        line_ = row["timeline"]
        t = np.array(line_["t"]) - (row["killed_at"] or 0.0)
        keep = (t > -2.0) & (t < 5.0)
        axes[0].plot(t[keep], np.array(line_["latency_ms"])[keep], label=row["mode"], lw=1)
    axes[0].axvline(0.0, color="grey", lw=0.5)
    axes[0].set(yscale="log", xlabel="scheduled time from the kill (s)", ylabel="mean latency (ms, 50 ms buckets)",
                title="(w) wordcount: latency around the kill")
    axes[0].legend(fontsize=8)
    state = doc.get("s", [])
    axes[1].bar([r["mode"] for r in state], [r["first_output_s"] for r in state])
    mb = state[0]["state_mb"] if state else 0
    axes[1].set(ylabel="s", title=f"(s) {mb} MB fold: kill to first output")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _ratios(doc: dict[str, Any]) -> dict[str, float]:
    w = {r["mode"]: r for r in doc.get("w", [])}
    out: dict[str, float] = {}

    def ratio(name: str, a: float, b: float) -> None:
        if np.isfinite(a) and np.isfinite(b) and b > 0:
            out[name] = a / b

    if "standby" in w:
        s = w["standby"]
        if "bytewax" in w:
            ratio("recovery_time_standby_over_bytewax", s["recovery_s"], w["bytewax"]["recovery_s"])
        if "restart" in w:
            ratio("recovery_time_standby_over_restart", s["recovery_s"], w["restart"]["recovery_s"])
        if "rollback" in w:
            ratio("mean_latency_during_standby_over_rollback", s["mean_latency_during_ms"],
                  w["rollback"]["mean_latency_during_ms"])
    state = {r["mode"]: r for r in doc.get("s", [])}
    if {"standby", "restart"} <= state.keys():
        ratio("state_first_output_standby_over_restart", state["standby"]["first_output_s"],
              state["restart"]["first_output_s"])
    f = doc.get("f", {})
    if f.get("standby") and f.get("no standby"):
        ratio("failure_free_throughput_standby_over_no_standby", float(np.mean(f["standby"])),
              float(np.mean(f["no standby"])))
    if f.get("standby") and f.get("ft=none"):
        ratio("failure_free_throughput_standby_over_ft_none", float(np.mean(f["standby"])),
              float(np.mean(f["ft=none"])))
    return out


@click.command()
@click.option("--parts", default="w,s,f", show_default=True)
@click.option("--modes", default=",".join(MODES), show_default=True)
@click.option("--rate", default=2000.0, show_default=True, help="lines/s of the wordcount (~4.5 words a line)")
@click.option("--seconds", default=12.0, show_default=True)
@click.option("--checkpoint-every", default=2.0, show_default=True,
              help="s between global checkpoints (rollback) or Bytewax snapshots")
@click.option("--operator-checkpoint-every", default=200, show_default=True,
              help="tasks between an operator's checkpoints (standby, restart)")
@click.option("--repeat", default=3, show_default=True, help="(w): runs of each mode (medians are reported)")
@click.option("--nodes", default=3, show_default=True, help="(w): node processes (node 1 is killed)")
@click.option("--state-mb", default=1024, show_default=True, help="(s): the fold's state")
@click.option("--lines", default=60_000, show_default=True, help="(f): lines of the unpaced wordcount")
@click.option("--peer-python", default=str(Path(__file__).parents[1] / ".venv-peers" / "bin" / "python"),
              show_default=True, help="the Python with bytewax (scripts/setup-peers.sh)")
@click.option("--quick", is_flag=True, help="shorter runs, a 256 MB state")
def main(parts: str, modes: str, rate: float, seconds: float, checkpoint_every: float,
         operator_checkpoint_every: int, repeat: int, nodes: int, state_mb: int, lines: int, peer_python: str,
         quick: bool) -> None:
    """Standby actors: recovery time, first output, untouched paths, failure-free cost."""
    if quick:
        seconds, state_mb, lines, repeat = 8.0, 256, 20_000, 1
    chosen = [m.strip() for m in modes.split(",") if m.strip()]
    if "bytewax" in chosen and not Path(peer_python).exists():
        click.echo(f"no peers' Python at {peer_python} (bash scripts/setup-peers.sh): no Bytewax", err=True)
        chosen.remove("bytewax")
    todo = parts.split(",")
    stamp, meta = run_meta(rate=rate, seconds=seconds, checkpoint_every=checkpoint_every, nodes=nodes, repeat=repeat,
                           operator_checkpoint_every=operator_checkpoint_every, state_mb=state_mb, lines=lines)
    doc: dict[str, Any] = {"meta": meta}
    steps = (len(chosen) * repeat if "w" in todo else 0) + (2 if "s" in todo else 0) + (6 if "f" in todo else 0)
    with Progress() as progress:
        task = progress.add_task("standby", total=steps)
        if "w" in todo:
            runs: dict[str, list[dict[str, Any]]] = {}
            for _ in range(repeat):  # the modes in turn, each round: the machine's noise drifts
                for mode in chosen:
                    run = run_mode(mode, rate, seconds, checkpoint_every, operator_checkpoint_every, peer_python, nodes)
                    runs.setdefault(mode, []).append(summarize(run, checkpoint_every))
                    progress.advance(task)
            doc["w"] = [_median(rows) for rows in runs.values()]
            doc["w_runs"] = [{k: v for k, v in row.items() if k != "timeline"}
                             for rows in runs.values() for row in rows]
        if "s" in todo:
            doc["s"] = []
            for mode in ("standby", "restart"):
                doc["s"].append(run_state(mode, state_mb, rate=200.0, seconds=max(seconds, 50.0), every=1500))
                progress.advance(task)
        if "f" in todo:
            doc["f"] = {"standby": [], "no standby": [], "ft=none": []}
            for _ in range(2):  # the default mode with and without standbys, and ft="none" beside them
                for name, standby, ft in (("standby", 1, "lineage_stash"), ("no standby", 0, "lineage_stash"),
                                          ("ft=none", 0, "none")):
                    doc["f"][name].append(run_throughput(standby, lines, ft))
                    progress.advance(task)
    doc["ratios"] = _ratios(doc)
    _report(doc)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"standby-{stamp}.json"
    path.write_text(json.dumps(doc, indent=1))
    _plot(doc, path.with_suffix(".png"))
    click.echo(f"wrote {path} and .png")


def _phases(mode: str, recoveries: list[dict[str, Any]]) -> None:
    for rec in recoveries:
        how = "promotion" if rec["promoted"] else "restart"
        click.echo(f"  {mode}: {how} of {rec['actors']} actor(s): detection {rec['detection_ms']:.0f} ms, "
                   f"restart {rec['restart_ms']:.0f} ms, flush {rec['flush_ms']:.0f} ms, reads {rec['fetch_ms']:.0f} "
                   f"ms, replay {rec['replay_ms']:.0f} ms ({rec['tasks_replayed']} tasks, {rec['from_standby']} "
                   f"from a standby's copy)")


def _report(doc: dict[str, Any]) -> None:
    if doc.get("w"):
        click.echo(f"(w) wordcount, node 1 killed at half time (medians of {doc['w'][0]['runs']} runs)")
        click.echo(f"{'mode':<10}{'before ms':>10}{'recovery s':>11}{'1st output s':>13}{'mean during ms':>15}"
                   f"{'untouched':>10}  exact")
        for r in doc["w"]:
            click.echo(f"{r['mode']:<10}{r['baseline_ms']:>10.2f}{r['recovery_s']:>11.3f}{r['first_output_s']:>13.3f}"
                       f"{r['mean_latency_during_ms']:>15.1f}{r['untouched_after_over_before']:>10.2f}  {r['exact']}"
                       f" {r['note']}")
        for r in doc["w"]:
            _phases(r["mode"], r["recoveries"])
    for r in doc.get("s", []):
        click.echo(f"(s) {r['state_mb']} MB fold, {r['mode']}: first output {r['first_output_s']:.3f} s after the kill"
                   f" (checkpointed{' and loaded' if r['mode'] == 'standby' else ''} before it: {r['ready']})")
        _phases(r["mode"], r["recoveries"])
    if doc.get("f"):
        click.echo("(f) lines/s, checkpoint every 1,000 tasks: " + ", ".join(
            f"{k} {' / '.join(f'{v:,.0f}' for v in vs)}" for k, vs in doc["f"].items()))
    for name, value in doc["ratios"].items():
        target, how = TARGETS[name]
        if target is None:
            click.echo(f"{name}: {value:.3f}")
            continue
        met = value <= target if how == "<=" else value >= target
        click.echo(f"{name}: {value:.3f} (target {how} {target}): {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    sys.exit(main())
