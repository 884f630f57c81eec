"""Rescaling a keyed stage with 100 MB of state while records flow: how long the records of the
keys that move wait, and the other keys' (issue target: <= 0.5 s for the moving keys, 0 s for
the rest), against stopping with a savepoint and starting again at the new parallelism (what
Flink does to rescale: every key waits for the whole restart).

The flow: a paced source (``--rate`` records a second, each a key and its scheduled time; first
one record for each of ``--keys`` keys, which makes the state) -> a running count per key whose
state holds ``--value-bytes`` bytes per key (2 instances) -> a sink that writes each update's
latency (from its newest record's scheduled time to its write) to a file. At ``--at`` seconds the
count stage goes to 4 instances: live (``RunningFlow.rescale``), or by ``stop(savepoint=)`` and
``start(from_savepoint=)``. Both runs on one 2-node cluster, in the default ``ft``.

Run: ``python bench/rescale.py [--keys 20000] [--value-bytes 5000] [--rate 2000] [--seconds 12]``.
Writes ``bench/results/rescale-<time>.json`` and ``.png`` (latency per 100 ms, moving keys and
the others, before, during and after) and prints a table with the targets.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import click
import numpy as np
from run_meta import run_meta

import actorrt
from actorrt.streaming import Dataflow
from actorrt.streaming.keys import partition

RESULTS = Path(__file__).parent / "results"
TARGET_MOVING_S, TARGET_OTHERS_S = 0.5, 0.0
BUCKET_S = 0.1


class KeyedSource:
    """``keys`` records at ``t0`` (one per key: the state), then ``rate`` a second on keys spread
    by a multiplicative hash; each record is ``(scheduled time, key)``, read when due."""

    def __init__(self, keys: int, rate: float, seconds: float, t0: float) -> None:
        self.keys, self.rate, self.t0 = keys, rate, t0
        self.total = keys + int(rate * seconds)
        self.poll_s = 0.001

    def at(self, i: int) -> float:
        return self.t0 if i < self.keys else self.t0 + (i - self.keys) / self.rate

    def next_range(self, after: int | None, limit: int) -> tuple[int, int, int] | None:
        start = 0 if after is None else after + 1
        due = start
        now = time.time()
        while due < min(self.total, start + limit) and self.at(due) <= now:
            due += 1
        return (start, due - 1, due - start) if due > start else None

    def read(self, found: tuple[int, int, int]) -> list[tuple[float, int]]:
        first, last, _ = found
        return [(self.at(i), i if i < self.keys else (i * 2654435761) % self.keys) for i in range(first, last + 1)]

    def ended(self, after: int | None) -> bool:
        return (0 if after is None else after + 1) >= self.total


class LatencySink:
    """Appends ``key latency written-at`` per update to a file per writer (not exactly-once: no
    commit waits before a write)."""

    exactly_once = False

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def write(self, writer: str, number: int, records: list[tuple[int, float]]) -> None:
        now = time.time()
        with open(Path(self.directory) / (writer.replace("/", "-") + ".lat"), "a") as f:
            f.write("".join(f"{key} {now - newest:.6f} {now:.6f}\n" for key, newest in records))


def flow_of(source: KeyedSource, directory: str, value_bytes: int, parallelism: int) -> Dataflow:
    flow = Dataflow("rescale-bench", batch_size=50, checkpoint_every=None)
    (flow.source(source)
     .key_by(_key)
     .fold(lambda: (0, 0.0, bytes(value_bytes)), _count, parallelism=parallelism, name="count")
     .map(_update)
     .sink(LatencySink(directory)))
    return flow


def _key(record: tuple[float, int]) -> int:
    return record[1]


def _count(state: tuple[int, float, bytes], record: tuple[float, int]) -> tuple[int, float, bytes]:
    return state[0] + 1, max(state[1], record[0]), state[2]


def _update(keyed: tuple[int, tuple[int, float, bytes]]) -> tuple[int, float]:
    return keyed[0], keyed[1][1]


def run(mode: str, keys: int, value_bytes: int, rate: float, seconds: float, at: float) -> dict[str, Any]:
    directory = tempfile.mkdtemp(prefix="rescale-")
    t0 = time.time() + 1.0
    source = KeyedSource(keys, rate, seconds, t0)
    running = flow_of(source, directory, value_bytes, 2).start(timeout=seconds + 120)
    time.sleep(max(0.0, t0 + at - time.time()))
    began = time.time()
    if mode == "live":
        running.rescale("count", 4)
    else:
        running.stop(savepoint=Path(directory) / "savepoint")
        running = flow_of(source, directory, value_bytes, 4).start(timeout=seconds + 120,
                                                                    from_savepoint=Path(directory) / "savepoint")
    ended = time.time()
    running.finish()
    samples = []  # (key, scheduled time from t0, latency)
    for path in Path(directory).glob("*.lat"):
        for line in path.read_text().splitlines():
            key, latency, written = line.split()
            samples.append((int(key), float(written) - float(latency) - t0, float(latency)))
    return {"mode": mode, "began_s": began - t0, "ended_s": ended - t0, "call_s": ended - began,
            "samples": samples}


def summary(result: dict[str, Any], warm_s: float) -> dict[str, Any]:
    """Per group (moving keys, the others): latency p50 before the rescale, and how long its
    records waited because of it: the largest latency of records scheduled from the rescale on,
    less that p50."""
    out = {}
    began = result["began_s"]
    for group, moving in (("moving", True), ("others", False)):
        mine = [(t, lat) for key, t, lat in result["samples"]
                if t >= warm_s and (partition(key, 2) != partition(key, 4)) == moving]
        before = [lat for t, lat in mine if t < began]
        during = [lat for t, lat in mine if began <= t <= result["ended_s"] + 1.0]
        base = float(np.percentile(before, 50)) if before else float("nan")
        out[group] = {"p50_before_s": base, "max_during_s": max(during, default=float("nan")),
                      "waited_s": max(0.0, max(during, default=base) - base), "records": len(mine)}
    return out


def _timeline(samples: list[tuple[int, float, float]], moving: bool, until: float) -> tuple[list[float], list[float]]:
    buckets: dict[int, list[float]] = {}
    for key, t, lat in samples:
        if (partition(key, 2) != partition(key, 4)) == moving and 0 <= t <= until:
            buckets.setdefault(int(t / BUCKET_S), []).append(lat)
    xs = sorted(buckets)
    return [x * BUCKET_S for x in xs], [max(buckets[x]) for x in xs]


def _plot(doc: dict[str, Any], runs: list[dict[str, Any]], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(6 * len(runs), 3.8), sharey=True)
    for ax, result in zip(np.atleast_1d(axes), runs, strict=True):
        for moving, color in ((True, "tab:red"), (False, "tab:blue")):
            xs, ys = _timeline(result["samples"], moving, doc["seconds"])
            ax.plot(xs, ys, color=color, label="keys that move" if moving else "other keys")
        ax.axvspan(result["began_s"], result["ended_s"], color="grey", alpha=0.2, label="the rescale call")
        ax.set_yscale("log")
        ax.set_xlabel("scheduled time (s)")
        ax.set_title({"live": "RunningFlow.rescale(count, 4)", "savepoint": "stop with savepoint, start at 4"}
                     [result["mode"]])
        ax.legend(fontsize=8)
    np.atleast_1d(axes)[0].set_ylabel(f"latency, max per {BUCKET_S * 1000:.0f} ms (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


@click.command()
@click.option("--keys", default=20_000, show_default=True)
@click.option("--value-bytes", default=5_000, show_default=True, help="state per key (20,000 x 5,000 B: 100 MB)")
@click.option("--rate", default=2000.0, show_default=True, help="records a second after the first one per key")
@click.option("--seconds", default=12.0, show_default=True)
@click.option("--at", default=6.0, show_default=True, help="seconds in, the rescale")
@click.option("--quick", is_flag=True, help="2,000 keys of 5,000 B (10 MB), 6 s, the rescale at 3 s")
def main(keys: int, value_bytes: int, rate: float, seconds: float, at: float, quick: bool) -> None:
    """Records' wait during a rescale from 2 to 4 instances: live, and by savepoint and restart."""
    if quick:
        keys, seconds, at = 2000, 6.0, 3.0
    stamp, meta = run_meta(keys=keys, value_bytes=value_bytes, rate=rate, seconds=seconds, at=at)
    warm = at / 2  # the first records (one per key) are a burst: latency from then on
    actorrt.init(num_nodes=2)
    try:
        runs = []
        for mode in ("live", "savepoint"):
            runs.append(run(mode, keys, value_bytes, rate, seconds, at))
    finally:
        actorrt.shutdown()
    doc = {**meta, "state_mb": keys * value_bytes / 1e6,
           "runs": [{k: v for k, v in r.items() if k != "samples"} | {"summary": summary(r, warm)} for r in runs]}
    RESULTS.mkdir(exist_ok=True)
    base = RESULTS / f"rescale-{stamp}"
    base.with_suffix(".json").write_text(json.dumps(doc, indent=1))
    _plot(doc, runs, base.with_suffix(".png"))
    print(f"rescale 2 -> 4, {doc['state_mb']:.0f} MB of state ({stamp}, commit {meta['commit']}): {base}.json")
    for r in doc["runs"]:
        s = r["summary"]
        print(f"  {r['mode']:<10} call {r['call_s']:.2f} s; moving keys waited {s['moving']['waited_s']:.2f} s "
              f"(target <= {TARGET_MOVING_S}), others {s['others']['waited_s']:.2f} s (target {TARGET_OTHERS_S}); "
              f"p50 before {s['others']['p50_before_s'] * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
