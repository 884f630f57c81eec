"""Streaming wordcount at a fixed offered rate: latency, the highest sustainable rate, and a
failure timeline (the paper's Figure 13 and the streaming row of Table 2), against Bytewax and PyFlink.

The job: lines scheduled at a fixed rate (line i at T0 + i/rate) -> split into words (2 instances)
-> a running count per word (2 instances, nondeterministic: they take both splitters' batches in
arrival order) -> the updates, written by a sink. An update's latency is from its line's scheduled
time (the newest line of the batch that made it) to when the sink writes it, on one host's clock;
every system's sink reads the clock the same way.

- ``lineage_stash``, ``none``, ``global_rollback`` (global rollback: a global checkpoint every
  ``--checkpoint-every`` s, everything goes back to the last one after a failure) run on
  ``actorrt.streaming``: the source is an operator pulling the schedule (what it read is in its
  lineage), so a global rollback rewinds it too.
- Bytewax (``bytewax==0.21.1``) and PyFlink (``apache-flink==2.3.0``) run the same job in the peers'
  environment (``bash scripts/setup-peers.sh``; their pins clash with actorrt's grpcio and
  protobuf): ``bench/peers/``. Bytewax resumes from its last snapshot (every ``--checkpoint-every``
  s) after a failure, restarted at once by this script (its operators would do it by hand).

Parts: (a) latency CDFs at ``--rate``; (b) the highest of ``--rates`` each system sustains (p99
latency over the second half under ``SUSTAINED_P99_S``, and done within 2 s of the schedule's end);
(c) a failure timeline at ``--rate``: the node (or Bytewax process) running a count instance is
SIGKILLed at half time; throughput per second and latency by scheduled time, and the recovery
time: until latency is back within 10% of before (as Clonos measures it).

Run: ``python bench/streaming.py [--quick] [--parts a,b,c] [--systems ...]``. Writes
``bench/results/streaming-<time>.json`` and ``.png`` and prints the tables with the targets.
"""

from __future__ import annotations

import collections
import datetime as _dt
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import numpy as np
from rich.progress import Progress
from run_meta import commit

import actorrt
from actorrt.streaming import Dataflow

RESULTS = Path(__file__).parent / "results"
PEERS = Path(__file__).parent / "peers"
WORDS = "the quick brown fox jumps over the lazy dog and the cat sat on a mat".split()
SUSTAINED_P99_S = 1.0
PROBE_EVERY_S = 0.005
OPERATOR_CHECKPOINT_EVERY = 200
OURS = ("lineage_stash", "none", "global_rollback")
TARGETS = {"rate_ls_over_none": 0.8, "p50_ls_over_none": 1.1, "recovery_mean_ls_over_rollback": 0.1,
           "rate_ls_over_bytewax": 1.0, "recovery_time_ls_over_bytewax": 0.2}


def line(i: int) -> str:
    return " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(1 + i % 8))


class PacedSource:
    """Record i (``record(i)``, a line by default) at T0 + i/rate, with that time, pulled by the
    source operator: what is due now is a recorded range, and a range's records are the same every
    time (a replay or a rollback reads them again)."""

    def __init__(self, rate: float, seconds: float, t0: float, record: Callable[[int], Any] = line) -> None:
        self.rate, self.total, self.t0, self.record = rate, int(rate * seconds), t0, record
        self.poll_s = 0.001  # asked again this soon when nothing is due

    def next_range(self, after: int | None, limit: int) -> tuple[int, int, int] | None:
        start = 0 if after is None else after + 1
        due = min(self.total, int((time.time() - self.t0) * self.rate) + 1, start + limit)
        return (start, due - 1, due - start) if due > start else None

    def read(self, found: tuple[int, int, int]) -> list[tuple[float, Any]]:
        first, last, _ = found
        return [(self.t0 + i / self.rate, self.record(i)) for i in range(first, last + 1)]

    def ended(self, after: int | None) -> bool:
        return (0 if after is None else after + 1) >= self.total


def _split(timed_line: tuple[float, str]) -> list[tuple[float, str]]:
    t, text = timed_line
    return [(t, word) for word in text.split()]


def _count(acc: tuple[int, float], timed_word: tuple[float, str]) -> tuple[int, float]:
    return acc[0] + 1, max(acc[1], timed_word[0])


class LatencyFiles:
    """A measuring sink: each count operator appends its updates (word, count, emitted at,
    latency) to a file of its own. Not exactly-once, so no commit waits before a write (the same
    outputs collected in the operators' state would be checkpointed again and again); a replay or
    a rollback may write an update again, and ``read_latencies`` keeps its first emission."""

    exactly_once = False

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def write(self, writer: str, number: int, records: list[tuple[str, tuple[int, float]]]) -> None:
        # Emitted when written, as the peers' sinks measure it. The clock is read here, not in an
        # operator, so it is no recorded event: a replay's rewrite is later, and only the first counts.
        now = time.time()
        with open(Path(self.directory) / (writer.replace("/", "-") + ".lat"), "a") as f:
            f.write("".join(f"{w} {n} {now:.6f} {now - newest:.6f}\n" for w, (n, newest) in records))


@dataclass
class Run:
    system: str
    rate: float
    seconds: float
    samples: list[tuple[float, float]] = field(default_factory=list)  # (emitted at, latency s), from t0
    wall_s: float = 0.0
    killed_at: float | None = None  # since t0
    dead_at: float | None = None  # since t0: the killed process had exited by then
    note: str = ""
    exact: bool | None = None  # every word's final count equals the plain count
    # Per writer (a count instance, or Bytewax's process): s from the kill to its first output
    # that no one had emitted before the kill.
    first_outputs: dict[str, float] = field(default_factory=dict)
    probes: list[float] = field(default_factory=list)  # when each call of the untouched path returned, from t0
    recoveries: list[dict[str, Any]] = field(default_factory=list)  # the nodes' recovery stats (actorrt)

    def latencies(self, since: float = 0.0) -> np.ndarray:
        return np.array([lat for t, lat in self.samples if t >= since] or [np.nan])

    def sustained(self) -> bool:
        late = self.latencies(self.seconds / 2)
        return bool(np.nanpercentile(late, 99) < SUSTAINED_P99_S) and self.wall_s < self.seconds + 2.0


def run_actorrt(ft: str, rate: float, seconds: float, kill: bool, checkpoint_every: float, standby: int = 0,
                operator_checkpoint_every: int = OPERATOR_CHECKPOINT_EVERY, probe: bool = False,
                num_nodes: int = 2) -> Run:
    """``standby``: each operator keeps a standby (``Dataflow(standby=)``); ``probe``: a driver
    thread calls an actor on node 0, a path the kill of node 1 does not touch."""
    actorrt.init(num_nodes=num_nodes, ft=ft, checkpoint_dir=tempfile.mkdtemp(prefix="actorrt-bench-ckpt-"))
    out = tempfile.mkdtemp(prefix="actorrt-bench-latency-")
    try:
        t0 = time.time() + 1.0
        # Each operator checkpoints every OPERATOR_CHECKPOINT_EVERY tasks under the lineage stash (a
        # failure replays at most that many); the rollback baseline takes global checkpoints instead.
        flow = Dataflow("wordcount", batch_size=max(10, int(rate / 200)), max_in_flight=8, standby=standby,
                        checkpoint_every=operator_checkpoint_every if ft == "lineage_stash" else None)
        (flow.source(PacedSource(rate, seconds, t0))
         .flat_map(_split, parallelism=2)
         .key_by(lambda timed_word: timed_word[1])
         .fold(lambda: (0, 0.0), _count, parallelism=2, name="count")
         .sink(LatencyFiles(out)))
        run = Run(ft, rate, seconds)
        stop = threading.Event()
        helpers = []
        if kill:
            helpers.append(threading.Thread(target=_kill_later, args=(t0 + seconds / 2, run, t0, stop), daemon=True))
        if ft == "global_rollback":
            helpers.append(threading.Thread(target=_global_checkpoints, args=(flow, checkpoint_every, stop),
                                            daemon=True))
        if probe:
            helpers.append(threading.Thread(target=_probe, args=(run, t0, stop), daemon=True))
        for helper in helpers:
            helper.start()
        flow.run(timeout=seconds + 60)
        run.wall_s = time.time() - t0
        stop.set()
        for helper in helpers:
            helper.join()
        run.recoveries = [r for node in actorrt.stats()["nodes"] for r in node["recoveries"]]
        run.samples = read_latencies(Path(out), t0, run)
        return run
    finally:
        actorrt.shutdown()
        shutil.rmtree(out, ignore_errors=True)


def _kill_later(at: float, run: Run, t0: float, stop: threading.Event) -> None:
    if not stop.wait(max(0.0, at - time.time())):
        run.killed_at = time.time() - t0
        actorrt.kill_node(1)  # one of the two count instances (and a splitter) lives there
        run.dead_at = time.time() - t0


@actorrt.remote
class _Echo:
    def echo(self, x: int) -> int:
        return x


def _probe(run: Run, t0: float, stop: threading.Event, every_s: float = PROBE_EVERY_S) -> None:
    """Calls to an actor on node 0, one every ``every_s`` (or as soon as the last returned), until
    ``stop``: how many return per second is the throughput of a path the kill of node 1 does not
    touch."""
    echo = _Echo.options(node=0).remote()
    i = 0
    while not stop.wait(max(0.0, t0 + i * every_s - time.time())):
        i += 1
        try:
            actorrt.get(echo.echo.remote(i), timeout=30)
        except actorrt.ActorRTError:  # a global rollback: the actor went back too
            continue
        run.probes.append(time.time() - t0)


def _global_checkpoints(flow: Dataflow, every: float, stop: threading.Event) -> None:
    """The rollback baseline's driver: a global checkpoint of every operator, every ``every`` s."""
    while not stop.wait(every):
        try:
            if flow.actors:
                actorrt.checkpoint(flow.actors, timeout=30)
        except actorrt.ActorRTError:
            pass  # a rollback or a failure under way: the next one


def run_peer(system: str, python: str, rate: float, seconds: float, kill: bool, checkpoint_every: float) -> Run:
    out = Path(tempfile.mkdtemp(prefix=f"bench-{system}-"))
    run = Run(system, rate, seconds)
    try:
        lead = 20.0 if system == "pyflink" else 1.5  # a Flink job takes ~10 s to start
        t0 = time.time() + lead
        env = dict(os.environ, RATE=str(rate), SECONDS=str(seconds), T0=str(t0), OUT=str(out / "lat"))
        if system == "bytewax":
            run.samples = _bytewax(python, env, out, t0, seconds, kill, checkpoint_every, run)
        else:
            cmd = [python, str(PEERS / "pyflink_wordcount.py")]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=seconds + 300)
            if done.returncode != 0:
                run.note = f"failed: {done.stderr[-300:]}"
            run.samples = read_latencies(out / "lat", t0, run)
        run.wall_s = (max(t for t, _ in run.samples) if run.samples else float("nan"))
        return run
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _bytewax(python: str, env: dict[str, str], out: Path, t0: float, seconds: float, kill: bool,
             checkpoint_every: float, run: Run) -> list[tuple[float, float]]:
    recovery = out / "recovery"
    recovery.mkdir()
    subprocess.run([python, "-m", "bytewax.recovery", str(recovery), "1"], check=True, capture_output=True)
    cmd = [python, "-m", "bytewax.run", f"{PEERS / 'bytewax_wordcount.py'}:flow", "-w", "1",
           "-r", str(recovery), "-s", str(max(1, round(checkpoint_every))), "-b", "0"]  # whole seconds
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if kill:
        time.sleep(max(0.0, t0 + seconds / 2 - time.time()))
        run.killed_at = time.time() - t0
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        run.dead_at = time.time() - t0
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # resumes
    proc.wait(timeout=seconds + 120)
    return read_latencies(out / "lat", t0, run)


def read_latencies(directory: Path, t0: float, run: Run) -> list[tuple[float, float]]:
    """(emitted at, latency) of every update in ``directory``'s ``.lat`` files (rows ``word count
    emitted latency``): a (word, count) emitted twice (a replay's or a rollback's, a resumed
    Bytewax's) counts once, at its first emission: when a consumer first saw it. Sets
    ``run.exact``: whether each word's last count equals a plain count of the lines."""
    first: dict[tuple[str, str], tuple[float, float]] = {}
    final: dict[str, int] = {}
    rows: dict[str, list[tuple[float, str, str]]] = {}  # per writer: (emitted, word, count)
    for path in directory.glob("*.lat"):
        for row in path.read_text().splitlines():
            word, count, emitted, latency = row.split()
            sample = (float(emitted) - t0, float(latency))
            rows.setdefault(path.stem, []).append((sample[0], word, count))
            if (word, count) not in first or sample < first[(word, count)]:
                first[(word, count)] = sample
            final[word] = max(final.get(word, 0), int(count))
    run.exact = final == _oracle(int(run.rate * run.seconds))
    if run.killed_at is not None:
        for writer, written in rows.items():
            # Outputs before the process was dead may be its own, not its successor's.
            after = run.dead_at if run.dead_at is not None else run.killed_at
            new = [e for e, word, count in written if e > after and first[(word, count)][0] == e]
            run.first_outputs[writer] = (min(new) - run.killed_at) if new else float("nan")
    return sorted(first.values())


def _oracle(lines: int) -> dict[str, int]:
    """Each word's count in lines 0..lines-1 (a line's words repeat with period len(WORDS) * 8)."""
    period = len(WORDS) * 8
    whole, rest = divmod(lines, period)
    per_period = collections.Counter(w for i in range(period) for w in line(i).split())
    tail = collections.Counter(w for i in range(rest) for w in line(whole * period + i).split())
    return dict(collections.Counter({w: n * whole for w, n in per_period.items()}) + tail)


def run_system(system: str, rate: float, seconds: float, kill: bool, opts: dict[str, Any]) -> Run:
    if system in OURS:
        return run_actorrt(system, rate, seconds, kill, opts["checkpoint_every"])
    return run_peer(system, opts["peer_python"], rate, seconds, kill, opts["checkpoint_every"])


def timeline(run: Run, bucket: float = 0.1) -> dict[str, list[float]]:
    """Outputs per second by emission time, and mean latency by scheduled time (per ``bucket`` s)."""
    if not run.samples:
        return {"t": [], "throughput": [], "latency_ms": []}
    end = max(t for t, _ in run.samples)
    edges = np.arange(0.0, end + bucket, bucket)
    emitted = np.array([t for t, _ in run.samples])
    scheduled = np.array([t - lat for t, lat in run.samples])
    lat = np.array([lat for _, lat in run.samples])
    throughput = np.histogram(emitted, edges)[0] / bucket
    which = np.digitize(scheduled, edges) - 1
    mean = [float(lat[which == i].mean() * 1e3) if np.any(which == i) else float("nan") for i in range(len(edges) - 1)]
    return {"t": edges[:-1].tolist(), "throughput": throughput.tolist(), "latency_ms": mean}


def recovery(run: Run, checkpoint_every: float, bucket: float = 0.25) -> dict[str, float]:
    """How a failure showed, by the lines' scheduled time (as Clonos measures it), in ``bucket``s:

    - ``baseline_ms``: the mean latency in a quiet stretch before it (before the last checkpoint
      or snapshot, whose lines a rollback redoes);
    - ``recovery_s``: from the kill until the mean latency is back within 10% (or 1 ms) of that
      and stays there for 1 s;
    - ``mean_latency_during_ms``: the mean latency of the lines scheduled from the last checkpoint
      before the kill to 3 s after it (the same stretch for every system).
    """
    if run.killed_at is None or not run.samples:
        return {}
    line = timeline(run, bucket)
    t, lat = np.array(line["t"]), np.array(line["latency_ms"])
    kill = run.killed_at
    quiet = [lat_s * 1e3 for emitted, lat_s in run.samples if 1.0 <= emitted - lat_s < kill - checkpoint_every - 0.2]
    before = float(np.mean(quiet)) if quiet else float("nan")
    bound = max(before * 1.1, before + 1.0)
    ok = ~(lat > bound)  # an empty bucket (nan) is no evidence either way
    steady = int(round(1.0 / bucket))
    recovered_at = next((ti for i, ti in enumerate(t) if ti >= kill and ok[i:i + steady].all()), float(t[-1]))
    during = [lat_s for emitted, lat_s in run.samples if kill - checkpoint_every <= emitted - lat_s < kill + 3.0]
    return {"baseline_ms": before, "recovery_s": float(recovered_at - kill),
            "mean_latency_during_ms": float(np.mean(during) * 1e3) if during else float("nan")}


def _summary(run: Run, checkpoint_every: float) -> dict[str, Any]:
    lat = run.latencies(1.0) * 1e3
    out = {"system": run.system, "rate": run.rate, "seconds": run.seconds, "updates": len(run.samples),
           "wall_s": run.wall_s, "sustained": run.sustained(), "exact": run.exact, "note": run.note}
    for p in (50, 90, 99):
        out[f"p{p}_ms"] = float(np.nanpercentile(lat, p))
    out["mean_ms"] = float(np.nanmean(lat))
    if run.killed_at is not None:
        out["killed_at"] = run.killed_at
        out["recovery"] = recovery(run, checkpoint_every)
        out["timeline"] = timeline(run)
    return out


def _plot(doc: dict[str, Any], runs: dict[str, list[Run]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(17, 4.5))
    for run in runs.get("a", []):
        lat = np.sort(run.latencies(1.0)) * 1e3
        axes[0].plot(lat, np.linspace(0, 1, len(lat)), label=run.system)
    axes[0].set(xscale="log", xlabel="latency (ms)", ylabel="fraction of updates",
                title=f"(a) latency CDF at {doc['params']['rate']:.0f} lines/s")
    best = doc.get("b", {}).get("highest", {})
    axes[1].bar(list(best), [v or 0 for v in best.values()])
    axes[1].set(ylabel="lines/s", title="(b) highest sustainable rate")
    for run in runs.get("c", []):
        line = timeline(run)
        axes[2].plot(line["t"], line["latency_ms"], label=run.system)
        if run.killed_at is not None:
            axes[2].axvline(run.killed_at, color="grey", lw=0.5)
    axes[2].set(yscale="log", xlabel="scheduled time (s)", ylabel="mean latency (ms)",
                title="(c) a failure at half time")
    for ax in (axes[0], axes[2]):
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


@click.command()
@click.option("--parts", default="a,b,c", show_default=True)
@click.option("--systems", default="lineage_stash,none,global_rollback,bytewax,pyflink", show_default=True)
@click.option("--rate", default=2000.0, show_default=True, help="lines/s for (a) and (c) (~4.5 words a line)")
@click.option("--rates", default="1000,2000,4000,8000,16000", show_default=True, help="(b): tried in order")
@click.option("--seconds", default=30.0, show_default=True)
@click.option("--checkpoint-every", default=2.0, show_default=True, help="s between global checkpoints or snapshots")
@click.option("--peer-python", default=str(Path(__file__).parents[1] / ".venv-peers" / "bin" / "python"),
              show_default=True, help="the Python with bytewax and apache-flink (scripts/setup-peers.sh)")
@click.option("--quick", is_flag=True, help="8 s runs, three rates")
def main(parts: str, systems: str, rate: float, rates: str, seconds: float, checkpoint_every: float,
         peer_python: str, quick: bool) -> None:
    """Figure 13 (a-c) and the streaming row of Table 2."""
    if quick:
        seconds, rates = 8.0, "1000,4000,16000"
    chosen = [s.strip() for s in systems.split(",") if s.strip()]
    if not Path(peer_python).exists():
        click.echo(f"no peers' Python at {peer_python} (bash scripts/setup-peers.sh): running without Bytewax "
                   f"and PyFlink", err=True)
        chosen = [s for s in chosen if s in OURS]
    opts = {"checkpoint_every": checkpoint_every, "peer_python": peer_python}
    todo = [(p, s, r) for p in parts.split(",") for s in chosen for r in
            ([float(x) for x in rates.split(",")] if p == "b" else [rate])
            if not (p == "c" and s in ("none", "pyflink"))]
    runs: dict[str, list[Run]] = {}
    failed_at: dict[str, float] = {}
    with Progress() as progress:
        task = progress.add_task("streaming", total=len(todo))
        for part, system, r in todo:
            if part == "b" and system in failed_at and r > failed_at[system]:
                progress.advance(task)
                continue  # it did not sustain a lower rate
            try:
                run = run_system(system, r, seconds, part == "c", opts)
            except actorrt.GetTimeoutError as exc:  # reported as a run that did not finish
                run = Run(system, r, seconds, wall_s=float("inf"), note=f"did not finish: {exc}")
            runs.setdefault(part, []).append(run)
            if part == "b" and not run.sustained():
                failed_at[system] = r
            progress.advance(task)
    doc = _report(runs, chosen, rate, seconds, checkpoint_every)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = RESULTS / f"streaming-{stamp}.json"
    path.write_text(json.dumps(doc, indent=1))
    _plot(doc, runs, path.with_suffix(".png"))
    click.echo(f"wrote {path} and .png")


def _report(runs: dict[str, list[Run]], systems: list[str], rate: float, seconds: float,
            checkpoint_every: float) -> dict[str, Any]:
    doc: dict[str, Any] = {"meta": {"time": _dt.datetime.now().isoformat(timespec="seconds"),
                                    "cpus": os.cpu_count(), "python": platform.python_version(),
                                    "commit": commit()},
                           "params": {"rate": rate, "seconds": seconds, "checkpoint_every": checkpoint_every}}
    ratios: dict[str, float] = {}
    if "a" in runs:
        doc["a"] = [_summary(run, checkpoint_every) for run in runs["a"]]
        click.echo(f"(a) latency at {rate:.0f} lines/s, {seconds:.0f} s (ms)")
        click.echo(f"{'system':<15}{'p50':>9}{'p90':>9}{'p99':>9}{'mean':>9}{'updates':>9}  sustained exact")
        by = {r["system"]: r for r in doc["a"]}
        for r in doc["a"]:
            click.echo(f"{r['system']:<15}{r['p50_ms']:>9.2f}{r['p90_ms']:>9.2f}{r['p99_ms']:>9.2f}"
                       f"{r['mean_ms']:>9.2f}{r['updates']:>9}  {r['sustained']!s:<9} {r['exact']} {r['note']}")
        if {"lineage_stash", "none"} <= by.keys():
            ratios["p50_ls_over_none"] = by["lineage_stash"]["p50_ms"] / by["none"]["p50_ms"]
    if "b" in runs:
        highest: dict[str, float | None] = {}
        for system in systems:
            ok = [run.rate for run in runs["b"] if run.system == system and run.sustained()]
            highest[system] = max(ok) if ok else None
        doc["b"] = {"runs": [_summary(run, checkpoint_every) for run in runs["b"]], "highest": highest}
        click.echo("(b) highest sustainable rate (lines/s): " + ", ".join(f"{s} {v}" for s, v in highest.items()))
        if highest.get("lineage_stash") and highest.get("none"):
            ratios["rate_ls_over_none"] = highest["lineage_stash"] / highest["none"]
        if highest.get("lineage_stash") and highest.get("bytewax"):
            ratios["rate_ls_over_bytewax"] = highest["lineage_stash"] / highest["bytewax"]
    if "c" in runs:
        doc["c"] = [_summary(run, checkpoint_every) for run in runs["c"]]
        click.echo(f"(c) a failure at half time, {rate:.0f} lines/s")
        click.echo(f"{'system':<15}{'before ms':>10}{'recovery s':>11}{'mean during ms':>16}{'mean all ms':>13}"
                   f"  exact")
        by = {r["system"]: r for r in doc["c"]}
        for r in doc["c"]:
            rec = r.get("recovery", {})
            nan = float("nan")
            click.echo(f"{r['system']:<15}{rec.get('baseline_ms', nan):>10.2f}{rec.get('recovery_s', nan):>11.2f}"
                       f"{rec.get('mean_latency_during_ms', nan):>16.1f}{r['mean_ms']:>13.2f}  {r['exact']}")
        ls = by.get("lineage_stash", {}).get("recovery", {})
        if ls and by.get("global_rollback", {}).get("recovery"):
            ratios["recovery_mean_ls_over_rollback"] = (ls["mean_latency_during_ms"]
                                                        / by["global_rollback"]["recovery"]["mean_latency_during_ms"])
        if ls and by.get("bytewax", {}).get("recovery"):
            bytewax_s = max(by["bytewax"]["recovery"]["recovery_s"], 1e-9)
            ratios["recovery_time_ls_over_bytewax"] = ls["recovery_s"] / bytewax_s
    doc["ratios"] = ratios
    for name, value in ratios.items():
        target = TARGETS[name]
        met = value <= target if name.startswith(("p50", "recovery")) else value >= target
        click.echo(f"{name}: {value:.3f} (target {'<=' if name.startswith(('p50', 'recovery')) else '>='} "
                   f"{target}): {'met' if met else 'NOT met'}")
    return doc


if __name__ == "__main__":
    sys.exit(main())
