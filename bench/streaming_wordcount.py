"""A streaming wordcount written by hand on plain actors, flat out: what logging costs small tasks.

The driver cuts a seeded text into batches of B lines and sends each to a mapper (round-robin, at
most ``--in-flight`` batches unanswered: a hand-written backpressure). A mapper counts the words of
its batch, splits the counts by a hash of the word and sends each part to its reducer without
waiting (fire-and-forget); a reducer adds the parts up. Two mappers and two reducers on two nodes,
so every batch makes about five small tasks across processes. Each mode runs on a fresh cluster;
the rate is lines per second from the first batch sent to the last count added, and the counts are
checked against ``collections.Counter`` over the same text.

Writes ``bench/results/streaming-wordcount-<time>.json`` and ``.png`` and prints a table with the
target (lineage stash / ``none`` at 20-line batches >= 0.8x).

Run: ``python bench/streaming_wordcount.py [--lines 40000] [--batches 20,200] [--ft lineage_stash,none]``.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import time
import zlib
from pathlib import Path
from typing import Any

import click
import numpy as np
from rich.progress import Progress
from run_meta import run_meta

import actorrt

TARGET_RATIO = 0.8  # lines/s at 20-line batches, lineage stash / none
RESULTS = Path(__file__).parent / "results"


@actorrt.remote
class Reducer:
    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()

    def add(self, counts: dict[str, int]) -> None:
        self.counts.update(counts)

    def total(self) -> dict[str, int]:
        return dict(self.counts)


@actorrt.remote
class Mapper:
    def __init__(self, reducers: list) -> None:
        self.reducers = reducers
        self.sent: list = []  # the parts sent and not yet known added

    def map(self, lines: list[str]) -> int:
        parts: list[collections.Counter[str]] = [collections.Counter() for _ in self.reducers]
        for line in lines:
            for word in line.split():
                parts[zlib.crc32(word.encode()) % len(parts)][word] += 1
        for reducer, part in zip(self.reducers, parts, strict=True):
            if part:
                self.sent.append(reducer.add.remote(dict(part)))
        return len(lines)

    async def drain(self) -> int:
        """Wait until every part sent was added: the end of the stream."""
        sent, self.sent = self.sent, []
        await asyncio.gather(*sent)
        return len(sent)


def text(lines: int, seed: int = 0) -> list[str]:
    """Seeded lines of 8 words from a 5,000-word vocabulary, drawn Zipf-like (a few words are common)."""
    rng = np.random.default_rng(seed)
    vocabulary = [f"w{i}" for i in range(5000)]
    draws = np.minimum(rng.zipf(1.3, size=lines * 8), len(vocabulary)) - 1
    words = [vocabulary[i] for i in draws]
    return [" ".join(words[i * 8:(i + 1) * 8]) for i in range(lines)]


def run(ft: str, lines: list[str], batch: int, in_flight: int) -> dict[str, Any]:
    actorrt.init(num_nodes=2, ft=ft)
    try:
        reducers = [Reducer.options(node=n).remote() for n in range(2)]
        mappers = [Mapper.options(node=n).remote(reducers) for n in range(2)]
        actorrt.get([m.drain.remote() for m in mappers], timeout=60)  # constructed
        batches = [lines[i:i + batch] for i in range(0, len(lines), batch)]
        pending: collections.deque = collections.deque()
        start = time.perf_counter()
        for i, chunk in enumerate(batches):
            pending.append(mappers[i % len(mappers)].map.remote(chunk))
            if len(pending) >= in_flight:
                actorrt.get(pending.popleft(), timeout=120)
        actorrt.get(list(pending), timeout=120)
        actorrt.get([m.drain.remote() for m in mappers], timeout=120)
        seconds = time.perf_counter() - start
        counts: collections.Counter[str] = collections.Counter()
        for part in actorrt.get([r.total.remote() for r in reducers], timeout=60):
            counts.update(part)
    finally:
        actorrt.shutdown()
    return {"ft": ft, "batch_lines": batch, "batches": len(batches), "seconds": seconds,
            "lines_per_s": len(lines) / seconds, "exact": counts == collections.Counter(
                word for line in lines for word in line.split())}


def _plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted({r["batch_lines"] for r in results})
    modes = sorted({r["ft"] for r in results})
    fig, ax = plt.subplots(figsize=(6, 3.5))
    width = 0.8 / len(modes)
    for k, ft in enumerate(modes):
        rates = [next((r["lines_per_s"] for r in results if r["ft"] == ft and r["batch_lines"] == b), 0)
                 for b in sizes]
        ax.bar([i + k * width for i in range(len(sizes))], rates, width, label=ft)
    ax.set_xticks([i + width * (len(modes) - 1) / 2 for i in range(len(sizes))], [f"{b} lines" for b in sizes])
    ax.set_ylabel("lines per second")
    ax.set_title("Streaming wordcount by hand, flat out (2 mappers, 2 reducers, 2 nodes)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


@click.command()
@click.option("--lines", "total", default=40_000, show_default=True, help="lines in the stream")
@click.option("--batches", "batches_text", default="20,200", show_default=True, help="lines per batch, a list")
@click.option("--ft", "modes_text", default="lineage_stash,none", show_default=True)
@click.option("--in-flight", default=64, show_default=True, help="batches the driver leaves unanswered at most")
@click.option("--quick", is_flag=True, help="10,000 lines")
def main(total: int, batches_text: str, modes_text: str, in_flight: int, quick: bool) -> None:
    """Lines per second of a hand-written streaming wordcount, per fault-tolerance mode and batch size."""
    lines = text(10_000 if quick else total)
    sizes = [int(b) for b in batches_text.split(",") if b.strip()]
    modes = [m.strip() for m in modes_text.split(",") if m.strip()]
    results = []
    with Progress(transient=True) as progress:
        task = progress.add_task("wordcount", total=len(sizes) * len(modes))
        for batch in sizes:
            for ft in modes:
                results.append(run(ft, lines, batch, in_flight))
                progress.advance(task)

    click.echo(f"streaming wordcount: {len(lines)} lines, 2 mappers and 2 reducers on 2 nodes, at most "
               f"{in_flight} batches in flight; {os.cpu_count()} cores")
    click.echo(f"{'ft':<15}{'batch lines':>12}{'seconds':>9}{'lines/s':>10}{'exact':>7}")
    for r in results:
        click.echo(f"{r['ft']:<15}{r['batch_lines']:>12}{r['seconds']:>9.2f}{r['lines_per_s']:>10.0f}"
                   f"{str(r['exact']):>7}")
    ratios = {}
    for batch in sizes:
        by_mode = {r["ft"]: r for r in results if r["batch_lines"] == batch}
        if {"lineage_stash", "none"} <= by_mode.keys():
            ratio = ratios[f"ls_over_none_at_{batch}"] = (by_mode["lineage_stash"]["lines_per_s"]
                                                         / by_mode["none"]["lines_per_s"])
            target = f" (target >= {TARGET_RATIO}x)" if batch == 20 else ""
            click.echo(f"{batch}-line batches, lines/s lineage stash / none: {ratio:.2f}x{target}")

    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp, meta = run_meta(lines=len(lines), in_flight=in_flight)
    (RESULTS / f"streaming-wordcount-{stamp}.json").write_text(
        json.dumps({"meta": meta, "results": results, "ratios": ratios}, indent=1))
    _plot(results, RESULTS / f"streaming-wordcount-{stamp}.png")
    click.echo(f"wrote {RESULTS}/streaming-wordcount-{stamp}.json and .png")
    if not all(r["exact"] for r in results):
        raise SystemExit("a run's counts differ from collections.Counter over the same text")


if __name__ == "__main__":
    main()
