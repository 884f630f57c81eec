"""Nexmark on ``actorrt.streaming``: the throughput of every query, against Bytewax, and Q3 and Q8
around a node kill (the Clonos paper's plots).

The events are Nexmark's (``actorrt.streaming.nexmark``), made in source operators as they are
read (``--sources`` pulled ``NexmarkSource``s, each a share of the stream, unioned: what each read
is in its lineage, so a replay or a rollback makes the same events again); the queries are
``actorrt.streaming.nexmark_queries`` at parallelism 2 on two nodes, writing to a sink that keeps
nothing.

- ``lineage_stash``, ``none``, ``global_rollback`` (global rollback: a global checkpoint every
  ``--checkpoint-every`` s) run on ``actorrt.streaming``.
- Bytewax (``bytewax==0.21.1``, one worker) runs the same queries on the same events in the peers'
  environment (``bash scripts/setup-peers.sh``): ``bench/peers/bytewax_nexmark.py`` (not Q4 and
  Q6: they need per-key event-time timers, which Bytewax 0.21 has only inside windows). PyFlink
  does not run here: its Python sources and functions run in Beam's process mode, which did not
  sustain 2,000 records/s in the streaming wordcount (``bench/streaming.py``), and its own
  Nexmark needs Flink's Java generator, not these events.

Parts: (a) throughput: ``--events`` events as fast as the flow takes them, events per second
from the deploy to the end (the best of ``--repeat`` runs); (b) Q3 and Q8 at ``--rate`` events/s
for ``--seconds``, node 1 SIGKILLed at half time: outputs per second, p50 and p99 latency (from when
an output's inputs were due to when the sink has it) per quarter second, the recovery time as
Clonos measures it (until latency is back within 10% of before: the median over a second, see
``recovery_p50``), and the output rate of the operator instances the kill did not touch.

Run: ``python bench/nexmark.py [--quick] [--parts a,b] [--systems ...]``. Writes
``bench/results/nexmark-<time>.json`` and ``.png`` and prints the tables with the targets.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import click
import numpy as np
from rich.progress import Progress
from run_meta import commit
from streaming import Run, _global_checkpoints, _kill_later

import actorrt
from actorrt.streaming import Dataflow, EventTime, nexmark
from actorrt.streaming import nexmark_queries as queries

RESULTS = Path(__file__).parent / "results"
PEERS = Path(__file__).parent / "peers"
OURS = ("lineage_stash", "none", "global_rollback")
OPERATOR_CHECKPOINT_EVERY = 1000
BYTEWAX_QUERIES = ("q0", "q1", "q2", "q3", "q5", "q7", "q8")
TARGETS = {"throughput_ls_over_none": 0.85, "throughput_ls_over_bytewax": 1.0, "recovery_ls_over_rollback": 0.1,
           "untouched_during_over_before": 1.0}
BUCKET_S = 0.25


def _time(event: nexmark.Event) -> float:
    return event.date_time


class Blackhole:
    """A sink that keeps nothing (Nexmark's usual one): what is measured is the query."""

    exactly_once = False

    def write(self, writer: str, number: int, records: list[Any]) -> None:
        pass


class LatencyFiles:
    """A measuring sink for part (b): each writer appends ``emitted_at scheduled_at pid`` per
    output to a file of its own. ``scheduled_at``: when the output's inputs were due (the
    query's ``due`` of the record). Not exactly-once: a replay may write an output again, and
    only its first emission counts."""

    exactly_once = False

    def __init__(self, directory: str, due: Any) -> None:
        self.directory, self.due = directory, due

    def write(self, writer: str, number: int, records: list[Any]) -> None:
        now, pid = time.time(), os.getpid()
        with open(Path(self.directory) / (writer.replace("/", "-") + ".lat"), "a") as f:
            f.write("".join(f"{now:.6f} {self.due(r):.6f} {pid} {r!r}\n" for r in records))


def _auction_number(auction_id: int) -> int:
    """The event number of auction ``auction_id`` (3 auctions in each 50 events, after 1 person)."""
    k = auction_id - nexmark.FIRST_AUCTION_ID
    return k // nexmark.AUCTION_PROPORTION * nexmark.PROPORTION + nexmark.PERSON_PROPORTION + k % 3


class Due:
    """When a Q3 or Q8 output's inputs were all due, on a source paced from ``t0`` at ``rate``:
    Q3's, its auction's time (its seller came before); Q8's, its window's end."""

    def __init__(self, query: str, t0: float, rate: float, window_s: float) -> None:
        self.query, self.t0, self.rate, self.window_s = query, t0, rate, window_s

    def __call__(self, record: tuple) -> float:
        if self.query == "q3":
            return self.t0 + _auction_number(record[3]) / self.rate
        return self.t0 + record[2] + self.window_s - nexmark.BASE_TIME_S


def _events(flow: Dataflow, sources: int, count: int, rate: float, paced_from: float | None = None) -> Any:
    """The stream of ``count`` events, made by ``sources`` pulled sources (each a share of it)."""
    shares = [flow.source(nexmark.NexmarkSource(count, rate=rate, paced_from=paced_from, share=(i, sources)),
                          time=EventTime(_time), name=f"events{i}") for i in range(sources)]
    return shares[0].union(*shares[1:])


def throughput_actorrt(ft: str, query: str, count: int, rate: float, checkpoint_every: float,
                       sources: int) -> dict[str, Any]:
    actorrt.init(num_nodes=2, ft=ft, checkpoint_dir=tempfile.mkdtemp(prefix="actorrt-bench-ckpt-"))
    try:
        flow = Dataflow(f"nexmark-{query}", batch_size=500,
                        checkpoint_every=OPERATOR_CHECKPOINT_EVERY if ft == "lineage_stash" else None)
        queries.query(query, _events(flow, sources, count, rate), rate).sink(Blackhole())
        stop = threading.Event()
        if ft == "global_rollback":
            threading.Thread(target=_global_checkpoints, args=(flow, checkpoint_every, stop), daemon=True).start()
        began = time.time()
        result = flow.start(timeout=600).finish()
        wall = time.time() - began
        stop.set()
        sunk = {s for s, stage in enumerate(flow.plan.stages) if any(port.sink for port in stage.ports)}
        outputs = sum(o["out"] for o in result.operators if o["stage"] in sunk)
        return {"events_per_s": count / wall, "wall_s": wall, "outputs": outputs}
    finally:
        actorrt.shutdown()


def throughput_bytewax(python: str, query: str, count: int, rate: float) -> dict[str, Any]:
    if query not in BYTEWAX_QUERIES:
        return {"events_per_s": None, "note": "not run: needs per-key event-time timers"}
    out = Path(tempfile.mkdtemp(prefix="bench-bytewax-")) / "times"
    env = dict(os.environ, QUERY=query, COUNT=str(count), RATE=str(rate), OUT=str(out))
    began = time.time()
    done = subprocess.run([python, "-m", "bytewax.run", f"{PEERS / 'bytewax_nexmark.py'}:flow", "-w", "1"],
                          env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        return {"events_per_s": None, "note": f"failed: {done.stderr[-300:]}"}
    first, end, outputs = out.read_text().split()
    shutil.rmtree(out.parent, ignore_errors=True)
    # From the process's start, as actorrt's from its deploy: Bytewax's own start is part of a run.
    return {"events_per_s": count / (float(end) - began), "wall_s": float(end) - began, "outputs": int(outputs),
            "from_first_batch_s": float(end) - float(first)}


def timeline_run(ft: str, query: str, rate: float, seconds: float, checkpoint_every: float,
                 window_s: float, sources: int) -> dict[str, Any]:
    actorrt.init(num_nodes=2, ft=ft, checkpoint_dir=tempfile.mkdtemp(prefix="actorrt-bench-ckpt-"))
    out = tempfile.mkdtemp(prefix="actorrt-bench-nexmark-")
    try:
        t0 = time.time() + 1.0
        flow = Dataflow(f"nexmark-{query}", batch_size=max(10, int(rate / 200)),
                        checkpoint_every=OPERATOR_CHECKPOINT_EVERY if ft == "lineage_stash" else None)
        events = _events(flow, sources, int(rate * seconds), rate, paced_from=t0)
        results = queries.q3(events, rate) if query == "q3" else queries.q8(events, window_s=window_s)
        results.sink(LatencyFiles(out, Due(query, t0, rate, window_s)))
        run = Run(ft, rate, seconds)
        stop = threading.Event()
        threading.Thread(target=_kill_later, args=(t0 + seconds / 2, run, t0, stop), daemon=True).start()
        if ft == "global_rollback":
            threading.Thread(target=_global_checkpoints, args=(flow, checkpoint_every, stop), daemon=True).start()
        flow.start(timeout=seconds + 120).finish()
        stop.set()
        # What the recoveries spent, phase by phase (detection, restart, flush, fetch, replay).
        phases = [r for node in actorrt.stats()["nodes"] for r in node.get("recoveries", [])]
        return {**_timeline(run, Path(out), t0, checkpoint_every), "recoveries": phases}
    finally:
        actorrt.shutdown()
        shutil.rmtree(out, ignore_errors=True)


def _timeline(run: Run, directory: Path, t0: float, checkpoint_every: float) -> dict[str, Any]:
    """Samples of the first emission of each output; per bucket of scheduled time, p50 and p99
    latency; per bucket of emission, outputs per second, all and from untouched writers."""
    first: dict[str, tuple[float, float, str]] = {}
    pids: dict[str, set[str]] = {}
    for path in directory.glob("*.lat"):
        for row in path.read_text().splitlines():
            emitted, due, pid, record = row.split(" ", 3)
            pids.setdefault(path.stem, set()).add(pid)
            sample = (float(emitted) - t0, float(emitted) - float(due), path.stem)
            if record not in first or sample < first[record]:
                first[record] = sample
    run.samples = sorted((t, lat) for t, lat, _ in first.values())
    untouched = {w for w, p in pids.items() if len(p) == 1}
    end = max((t for t, _ in run.samples), default=0.0)
    edges = np.arange(0.0, end + BUCKET_S, BUCKET_S)
    emitted = np.array([t for t, _, _ in first.values()])
    kept = np.array([t for t, _, w in first.values() if w in untouched] or [np.nan])
    scheduled = np.array([t - lat for t, lat in run.samples])
    lat = np.array([lat for _, lat in run.samples]) * 1e3
    which = np.digitize(scheduled, edges) - 1
    p50 = [float(np.percentile(lat[which == i], 50)) if np.any(which == i) else None for i in range(len(edges) - 1)]
    p99 = [float(np.percentile(lat[which == i], 99)) if np.any(which == i) else None for i in range(len(edges) - 1)]
    rec = recovery_p50(run, checkpoint_every)
    doc = {"system": run.system, "killed_at": run.killed_at, "outputs": len(run.samples), "recovery": rec,
           "t": edges[:-1].tolist(), "outputs_per_s": (np.histogram(emitted, edges)[0] / BUCKET_S).tolist(),
           "untouched_per_s": (np.histogram(kept, edges)[0] / BUCKET_S).tolist(), "p50_ms": p50, "p99_ms": p99,
           "untouched_writers": sorted(untouched), "writers": sorted(pids)}
    if run.killed_at is not None and rec and untouched:
        kill, span = run.killed_at, max(1.0, rec["recovery_s"])
        before = np.sum((kept >= kill - 5.0) & (kept < kill)) / 5.0
        during = np.sum((kept >= kill) & (kept < kill + span)) / span
        doc["untouched_during_over_before"] = float(during / before) if before else None
    return doc


def recovery_p50(run: Run, checkpoint_every: float, window_s: float = 1.0) -> dict[str, float]:
    """Clonos's recovery time on the median: from the kill until the p50 latency of the outputs
    due in a ``window_s`` window (stepped by ``BUCKET_S``) is back within 10% (or 1 ms) of the
    p50 before (due from 1 s to the last checkpoint before the kill). A window of medians, not a
    bucket's mean: Q3 emits ~30 outputs a second, and one slow output would move a bucket's mean
    past the bound, before the kill as after it. Also the mean latency of the outputs due from
    that checkpoint to 3 s after the kill, as ``streaming.recovery`` has it."""
    if run.killed_at is None or not run.samples:
        return {}
    kill = run.killed_at
    due = np.array([t - lat for t, lat in run.samples])
    lat = np.array([lat for _, lat in run.samples]) * 1e3
    quiet = lat[(due >= 1.0) & (due < kill - checkpoint_every - 0.2)]
    before = float(np.median(quiet)) if len(quiet) else float("nan")
    bound = max(before * 1.1, before + 1.0)
    recovered_at = float(due.max())
    for start in np.arange(kill, due.max(), BUCKET_S):
        window = lat[(due >= start) & (due < start + window_s)]
        if len(window) and np.median(window) <= bound:
            recovered_at = float(start)
            break
    during = lat[(due >= kill - checkpoint_every) & (due < kill + 3.0)]
    return {"baseline_ms": before, "recovery_s": recovered_at - kill,
            "mean_latency_during_ms": float(during.mean()) if len(during) else float("nan")}


def _plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timelines = doc.get("b", [])
    rows = 1 + (len(timelines) + 1) // 2
    fig, axes = plt.subplots(rows, 2, figsize=(14, 4 * rows), squeeze=False)
    if "a" in doc:
        systems = list(doc["a"]["systems"])
        names = list(doc["a"]["queries"])
        width = 0.8 / len(systems)
        for k, system in enumerate(systems):
            values = [doc["a"]["queries"][q].get(system, {}).get("events_per_s") or 0 for q in names]
            axes[0][0].bar(np.arange(len(names)) + k * width, values, width, label=system)
        axes[0][0].set(xticks=np.arange(len(names)) + 0.4 - width / 2, xticklabels=names, ylabel="events/s",
                       title="(a) throughput per query")
        axes[0][0].legend(fontsize=8)
    axes[0][1].axis("off")
    for i, line in enumerate(timelines):
        ax = axes[1 + i // 2][i % 2]
        t = np.array(line["t"])
        for key, style in (("p50_ms", "-"), ("p99_ms", ":")):
            ax.plot(t, [v if v is not None else np.nan for v in line[key]], style, marker=".", ms=3,
                    label=f"{line['system']} {key[:3]}")  # (Q8's windows end once a second: points)
        ax.set(yscale="log", xlabel="scheduled time (s)", ylabel="latency (ms)",
               title=f"(b) {line['query'].upper()}, {line['system']}: node 1 killed at {line['killed_at'] or 0:.1f} s")
        twin = ax.twinx()
        twin.plot(t, line["outputs_per_s"], color="grey", lw=0.6, label="outputs/s")
        twin.set(ylabel="outputs/s")
        if line["killed_at"] is not None:
            ax.axvline(line["killed_at"], color="red", lw=0.6)
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


@click.command()
@click.option("--parts", default="a,b", show_default=True)
@click.option("--systems", default="lineage_stash,none,global_rollback,bytewax", show_default=True)
@click.option("--queries", "names", default=",".join(queries.QUERIES), show_default=True)
@click.option("--events", default=200_000, show_default=True, help="(a): events per run")
@click.option("--repeat", default=2, show_default=True, help="(a): runs per query and system (the best counts)")
@click.option("--rate", default=5_000.0, show_default=True, help="(b): events/s")
@click.option("--seconds", default=20.0, show_default=True, help="(b): length of a run")
@click.option("--q8-window", default=1.0, show_default=True, help="(b): Q8's window (s), so that it emits often")
@click.option("--checkpoint-every", default=2.0, show_default=True, help="s between global checkpoints")
@click.option("--sources", default=2, show_default=True, help="actorrt: sources making the events, a share each")
@click.option("--peer-python", default=str(Path(__file__).parents[1] / ".venv-peers" / "bin" / "python"),
              show_default=True, help="the Python with bytewax (scripts/setup-peers.sh)")
@click.option("--quick", is_flag=True, help="50,000 events, one run each, 10 s timelines")
def main(parts: str, systems: str, names: str, events: int, repeat: int, rate: float, seconds: float,
         q8_window: float, checkpoint_every: float, sources: int, peer_python: str, quick: bool) -> None:
    """Nexmark's throughput per query, and Q3 and Q8 around a kill."""
    if quick:
        events, repeat, seconds = 50_000, 1, 10.0
    chosen = [s.strip() for s in systems.split(",") if s.strip()]
    if "bytewax" in chosen and not Path(peer_python).exists():
        click.echo(f"no peers' Python at {peer_python} (bash scripts/setup-peers.sh): running without Bytewax",
                   err=True)
        chosen.remove("bytewax")
    picked = [q.strip() for q in names.split(",") if q.strip()]
    doc: dict[str, Any] = {"meta": {"time": _dt.datetime.now().isoformat(timespec="seconds"), "cpus": os.cpu_count(),
                                    "python": platform.python_version(), "commit": commit()},
                           "params": {"events": events, "repeat": repeat, "rate": rate, "seconds": seconds,
                                      "q8_window": q8_window, "checkpoint_every": checkpoint_every,
                                      "sources": sources}}
    with Progress() as progress:
        if "a" in parts:
            doc["a"] = {"systems": chosen, "queries": {}}
            task = progress.add_task("throughput", total=len(picked) * len(chosen) * repeat)
            for query in picked:
                # Interleaved by system, so that the machine's drift falls on all of them alike.
                best: dict[str, dict[str, Any]] = {}
                for _ in range(repeat):
                    for system in chosen:
                        got = (throughput_bytewax(peer_python, query, events, rate) if system == "bytewax"
                               else throughput_actorrt(system, query, events, rate, checkpoint_every, sources))
                        if (got.get("events_per_s") or 0) > (best.get(system, {}).get("events_per_s") or 0) \
                                or system not in best:
                            best[system] = got
                        progress.advance(task)
                doc["a"]["queries"][query] = best
        if "b" in parts:
            doc["b"] = []
            todo = [(q, s) for q in ("q3", "q8") for s in chosen if s in ("lineage_stash", "global_rollback")]
            task = progress.add_task("kill timelines", total=len(todo))
            for query, system in todo:
                line = timeline_run(system, query, rate, seconds, checkpoint_every, q8_window, sources)
                doc["b"].append({"query": query, **line})
                progress.advance(task)
    _report(doc)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"nexmark-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(doc, indent=1))
    _plot(doc, path.with_suffix(".png"))
    click.echo(f"wrote {path} and .png")


def _report(doc: dict[str, Any]) -> None:
    ratios: dict[str, dict[str, float]] = {}
    if "a" in doc:
        systems = doc["a"]["systems"]
        click.echo("(a) throughput (events/s; outputs)")
        click.echo(f"{'query':<7}" + "".join(f"{s:>24}" for s in systems) + f"{'ls/none':>9}{'ls/bytewax':>12}")
        for query, by in doc["a"]["queries"].items():
            cells = []
            for s in systems:
                got = by.get(s, {})
                rate = got.get("events_per_s")
                cells.append(f"{rate:>14,.0f}; {got.get('outputs', 0):>7}" if rate else f"{'-':>24}")
            ls = (by.get("lineage_stash") or {}).get("events_per_s")
            none = (by.get("none") or {}).get("events_per_s")
            bw = (by.get("bytewax") or {}).get("events_per_s")
            if ls and none:
                ratios.setdefault("throughput_ls_over_none", {})[query] = ls / none
            if ls and bw:
                ratios.setdefault("throughput_ls_over_bytewax", {})[query] = ls / bw
            click.echo(f"{query:<7}" + "".join(f"{c:>24}" for c in cells)
                       + f"{ls / none if ls and none else float('nan'):>9.2f}"
                       + f"{ls / bw if ls and bw else float('nan'):>12.2f}")
    if "b" in doc:
        click.echo("(b) a kill at half time: recovery (until latency is back within 10% of before)")
        click.echo(f"{'query':<7}{'system':<15}{'before ms':>10}{'recovery s':>11}{'untouched during/before':>25}"
                   f"{'replayed':>10}{'replay s':>10}")
        by = {(line["query"], line["system"]): line for line in doc["b"]}
        for line in doc["b"]:
            rec = line.get("recovery") or {}
            nan = float("nan")
            replayed = sum(r.get("tasks_replayed", 0) for r in line.get("recoveries", []))
            replay_s = sum(r.get("replay_ms", 0) for r in line.get("recoveries", [])) / 1e3
            click.echo(f"{line['query']:<7}{line['system']:<15}{rec.get('baseline_ms', nan):>10.2f}"
                       f"{rec.get('recovery_s', nan):>11.2f}{line.get('untouched_during_over_before') or nan:>25.2f}"
                       f"{replayed:>10}{replay_s:>10.2f}")
            if line["system"] == "lineage_stash" and line.get("untouched_during_over_before") is not None:
                ratios.setdefault("untouched_during_over_before", {})[line["query"]] = \
                    line["untouched_during_over_before"]
        for query in ("q3", "q8"):
            ls, rb = by.get((query, "lineage_stash")), by.get((query, "global_rollback"))
            if ls and rb and ls.get("recovery") and rb.get("recovery"):
                ratios.setdefault("recovery_ls_over_rollback", {})[query] = (
                    ls["recovery"]["recovery_s"] / max(rb["recovery"]["recovery_s"], 1e-9))
    doc["ratios"] = ratios
    for name, per_query in ratios.items():
        target = TARGETS[name]
        below = name.startswith("recovery")
        for query, value in per_query.items():
            met = value <= target if below else value >= target
            click.echo(f"{name} {query}: {value:.3f} (target {'<=' if below else '>='} {target}): "
                       f"{'met' if met else 'NOT met'}")


if __name__ == "__main__":
    sys.exit(main())
