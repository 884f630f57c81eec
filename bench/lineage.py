"""Record lineage: what capturing it costs a streaming wordcount, what it takes in the store, and
how fast a backward query answers (issue targets: throughput with / without >= 0.97x, <= 32 B per
captured record, a backward query through 3 stages with 1M records in retention <= 50 ms).

The flow: a pulled list of seeded Zipf-like lines (8 words each) -> split into words (2
instances) -> a running count per word (2 instances), collected; on a 2-node cluster in the
default ``ft``, with ``none`` beside it for scale. Capture on and off alternate on one cluster,
``--reps`` times each, and the ratio is of the medians; the same for Nexmark's Q3 (persons
joined to their auctions) on ``--events`` events. Then one flow of ``--query-lines`` lines
(about 17 records a line in all: the line, its words, the updates) is queried: ``backward`` from
random updates of the count stage down to the source lines, and ``forward`` from random lines.

Run: ``python bench/lineage.py [--lines 20000] [--events 40000] [--reps 3] [--query-lines 60000] [--quick]``.
Writes ``bench/results/lineage-<time>.json`` and ``.png`` and prints a table with the targets.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

import click
import numpy as np
from nexmark import Blackhole
from run_meta import run_meta
from streaming_wordcount import text

import actorrt
from actorrt.core.record_lineage import lineage_store
from actorrt.lifecycle import current_driver
from actorrt.lineage import SourceRecord
from actorrt.store.relations import footprint
from actorrt.streaming import Dataflow, EventTime, ListSource, nexmark, nexmark_queries

RESULTS = Path(__file__).parent / "results"
TARGETS = {"throughput_ratio": 0.97, "bytes_per_record": 32, "backward_p50_ms": 50}


def wordcount(lines: list[str], lineage: bool, name: str = "wordcount") -> Dataflow:
    flow = Dataflow(name, batch_size=100, lineage=lineage)
    (flow.source(ListSource(lines))
     .flat_map(str.split, parallelism=2)
     .key_by(_word)
     .fold(_zero, _count, parallelism=2)
     .collect())
    return flow


def _word(word: str) -> str:
    return word


def _zero() -> int:
    return 0


def _count(n: int, _: str) -> int:
    return n + 1


def timed_run(lines: list[str], lineage: bool) -> tuple[float, Any]:
    flow = wordcount(lines, lineage)
    start = time.perf_counter()
    result = flow.run(timeout=600)
    return len(lines) / (time.perf_counter() - start), result


def q3_run(events: int, lineage: bool) -> float:
    """Nexmark Q3 (persons joined to their auctions, a connected process function) on ``events``
    pulled events: events per second."""
    flow = Dataflow("q3", batch_size=500, lineage=lineage)
    source = flow.source(nexmark.NexmarkSource(events, rate=10_000), time=EventTime(_event_time))
    nexmark_queries.query("q3", source, 10_000).sink(Blackhole())
    start = time.perf_counter()
    flow.start(timeout=600).finish()
    return events / (time.perf_counter() - start)


def _event_time(event: Any) -> float:
    return event.date_time


def overhead(run: Any, reps: int) -> dict[str, Any]:
    """``run(lineage)``'s rate with capture off and on, alternating on one cluster."""
    rates: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(reps):
        for mode in ("off", "on"):
            rates[mode].append(run(mode == "on"))
    return {"per_s": rates, "ratio": statistics.median(rates["on"]) / statistics.median(rates["off"])}


def store_bytes(result: Any) -> dict[str, Any]:
    """Bytes of the run's record lineage in the store, per record its stages emitted."""
    instances = [(op["stage"], op["instance"]) for op in result.operators]
    captured = sum(op["out"] for op in result.operators)
    used, keys = current_driver().call(footprint(lineage_store(), result.lineage, instances))
    return {"bytes": used, "keys": keys, "records": captured, "bytes_per_record": used / captured}


def queries(result: Any, lines: int, samples: int, seed: int = 0) -> dict[str, Any]:
    rng = random.Random(seed)
    picked = rng.sample(range(len(result.ids)), min(samples, len(result.ids)))
    backward, found = [], []
    for k in picked:
        start = time.perf_counter()
        trace = actorrt.lineage.backward(result.ids[k])
        backward.append((time.perf_counter() - start) * 1e3)
        found.append(len(trace.ends))
    forward = []
    for row in rng.sample(range(lines), min(samples, lines)):
        start = time.perf_counter()
        actorrt.lineage.forward(SourceRecord(result.lineage, "source0", row))
        forward.append((time.perf_counter() - start) * 1e3)
    return {"backward_ms": backward, "backward_sources": found, "forward_ms": forward,
            **{f"{kind}_p{p}_ms": float(np.percentile(times, p)) for kind, times in (("backward", backward),
                                                                                    ("forward", forward))
               for p in (50, 99)},
            "sources_p50": float(np.percentile(found, 50))}


def _plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    rates = doc["overhead"]["per_s"]
    for k, mode in enumerate(("off", "on")):
        axes[0].scatter([k] * len(rates[mode]), rates[mode], label=f"capture {mode}")
    axes[0].set_xticks([0, 1], ["capture off", "capture on"])
    axes[0].set_ylabel("lines per second")
    axes[0].set_title(f"wordcount: on / off = {doc['overhead']['ratio']:.3f}x")
    q = doc["queries"]
    axes[1].scatter(q["backward_sources"], q["backward_ms"], s=8, label="backward (x: source lines found)")
    axes[1].axhline(TARGETS["backward_p50_ms"], color="grey", linestyle=":", label="target p50")
    axes[1].set_xscale("symlog")
    axes[1].set_ylabel("ms")
    axes[1].set_title(f"queries, {doc['bytes']['records']:,} records kept")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


@click.command()
@click.option("--lines", default=20_000, show_default=True, help="lines per throughput run")
@click.option("--reps", default=3, show_default=True, help="runs with capture off and on, alternating")
@click.option("--query-lines", default=60_000, show_default=True, help="lines of the flow that is queried")
@click.option("--samples", default=200, show_default=True, help="queries of each kind")
@click.option("--events", default=40_000, show_default=True, help="Nexmark events per Q3 run")
@click.option("--quick", is_flag=True, help="5,000-line runs, 10,000 events, 2 reps, 10,000 lines queried")
def main(lines: int, reps: int, query_lines: int, samples: int, events: int, quick: bool) -> None:
    """Record lineage: capture overhead, store bytes per record, query latency."""
    if quick:
        lines, reps, query_lines, samples, events = 5000, 2, 10_000, 50, 10_000
    stamp, meta = run_meta(lines=lines, reps=reps, query_lines=query_lines, samples=samples, events=events)
    actorrt.init(num_nodes=2)
    try:
        words = text(lines)
        timed_run(words[:2000], False)  # warm: the first flow pays for imports and connections
        doc: dict[str, Any] = {**meta, "overhead": overhead(lambda on: timed_run(words, on)[0], reps),
                               "q3_overhead": overhead(lambda on: q3_run(events, on), reps)}
        _, result = timed_run(text(query_lines, seed=1), True)
        doc["bytes"] = store_bytes(result)
        doc["queries"] = queries(result, query_lines, samples)
    finally:
        actorrt.shutdown()
    RESULTS.mkdir(exist_ok=True)
    base = RESULTS / f"lineage-{stamp}"
    base.with_suffix(".json").write_text(json.dumps(doc, indent=1))
    _plot(doc, base.with_suffix(".png"))
    b, q, o, j = doc["bytes"], doc["queries"], doc["overhead"], doc["q3_overhead"]
    rows = [("wordcount, capture on / off", f"{o['ratio']:.3f}x ({statistics.median(o['per_s']['on']):,.0f} / "
             f"{statistics.median(o['per_s']['off']):,.0f} lines/s)", f">= {TARGETS['throughput_ratio']}x"),
            ("Nexmark Q3 (a join), on / off", f"{j['ratio']:.3f}x ({statistics.median(j['per_s']['on']):,.0f} / "
             f"{statistics.median(j['per_s']['off']):,.0f} events/s)", f">= {TARGETS['throughput_ratio']}x"),
            ("store bytes per captured record", f"{b['bytes_per_record']:.1f} ({b['bytes']:,} B, {b['records']:,} "
             f"records)", f"<= {TARGETS['bytes_per_record']}"),
            ("backward query, p50 (p99)", f"{q['backward_p50_ms']:.1f} ({q['backward_p99_ms']:.1f}) ms, "
             f"{q['sources_p50']:.0f} lines found (p50)", f"<= {TARGETS['backward_p50_ms']} ms"),
            ("forward query, p50 (p99)", f"{q['forward_p50_ms']:.1f} ({q['forward_p99_ms']:.1f}) ms", "")]
    print(f"record lineage ({stamp}, commit {meta['commit']}): {base}.json")
    for name, value, target in rows:
        print(f"  {name:<34} {value:<56} {target}")


if __name__ == "__main__":
    main()
