"""Wordcount from Spark through actors and back, with a node killed mid-run.

Spark reads a text corpus into a DataFrame; ``bridge.feed`` sends it, as Arrow record batches, to
mapper actors, which send word counts to nondeterministic reducer actors (they take whatever
arrives first). A node process is SIGKILLed while the DataFrame is being fed; its actors are
rebuilt by replay. ``bridge.to_dataframe`` brings the reducers' counts back into Spark, and the
result is compared with Spark's own ``groupBy().count()``.

The head serves its web dashboard meanwhile (the address is printed first).

    python examples/bridge_wordcount.py [--lines 20000] [--no-kill] [--dashboard-port 8265] [--hold 300]
"""

from __future__ import annotations

import argparse
import collections
import random
import tempfile
import threading
import time
import zlib
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

import actorrt
import bridge  # before creating the SparkSession: Spark's Python workers then run this interpreter


@actorrt.remote
class Reducer:
    def __init__(self):
        self.counts = collections.Counter()

    def add(self, counts):
        self.counts.update(counts)

    def rows(self):
        return [{"word": w, "count": c} for w, c in self.counts.items()]


@actorrt.remote
class Mapper:
    def __init__(self, reducers):
        self.reducers = reducers

    async def process(self, batch):
        parts = [collections.Counter() for _ in self.reducers]
        for line in batch.column("value").to_pylist():
            for word in line.split():
                parts[zlib.crc32(word.encode()) % len(parts)][word] += 1
        # Wait until the reducers applied them, so that feed() returning means counted.
        for ref in [r.add.remote(dict(p)) for r, p in zip(self.reducers, parts, strict=True) if p]:
            await ref


def write_corpus(path: Path, lines: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    vocabulary = [f"{a}{b}" for a in ("ka", "lo", "mi", "ne", "su", "ta") for b in ("n", "ri", "sho", "vel", "x")]
    path.write_text("\n".join(" ".join(rng.choices(vocabulary, k=rng.randint(3, 12))) for _ in range(lines)))


def kill_node_once_busy(node: int, tasks: int = 20) -> None:
    """SIGKILL ``node`` once its actors have run ``tasks`` tasks: mid-feed."""
    while sum(a["executed"] for n in actorrt.stats()["nodes"] if n["node"] == node for a in n["actors"]) < tasks:
        time.sleep(0.1)
    print(f"killed node {node} (pid {actorrt.kill_node(node)}) in the middle of the feed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--no-kill", action="store_true", help="do not kill a node")
    parser.add_argument("--dashboard-port", type=int, default=0, help="the dashboard's port (0: any free one)")
    parser.add_argument("--hold", type=float, default=0.0,
                        help="keep the cluster (and its dashboard) up this many seconds after the run")
    args = parser.parse_args()

    corpus = Path(tempfile.mkdtemp(prefix="actorrt-corpus-")) / "corpus.txt"
    write_corpus(corpus, args.lines)
    spark = (SparkSession.builder.master("local[2]").appName("actorrt-wordcount")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    info = actorrt.init(num_nodes=2, dashboard_port=args.dashboard_port)
    print(f"dashboard: {info['dashboard_url']} (the recovery shows on its Recoveries page; --hold 300 keeps it up)")
    try:
        lines = spark.read.text(str(corpus)).repartition(4)
        reducers = [Reducer.options(node=i % 2).remote() for i in range(4)]
        mappers = [Mapper.options(node=i % 2, nondeterministic=False).remote(reducers) for i in range(2)]
        if not args.no_kill:
            threading.Thread(target=kill_node_once_busy, args=(1,)).start()
        started = time.perf_counter()
        summary = bridge.feed(lines, mappers, "process", batch_rows=500)
        counts = bridge.to_dataframe(spark, [r.rows for r in reducers], schema="word string, count long")
        print(f"fed {summary.rows} lines in {summary.batches} Arrow batches, {time.perf_counter() - started:.1f} s")

        expected = (lines.select(sf.explode(sf.split("value", " ")).alias("word")).where("word != ''")
                    .groupBy("word").count())
        difference = counts.exceptAll(expected).count() + expected.exceptAll(counts).count()
        counts.orderBy(sf.desc("count")).show(5)
        for node in actorrt.stats()["nodes"]:
            for r in node["recoveries"]:
                print(f"node {node['node']} recovered {r['actors']} actors, replayed {r['tasks_replayed']} tasks "
                      f"(detection {r['detection_ms']:.0f} ms, replay {r['replay_ms']:.0f} ms)")
        print("equals Spark's own groupBy().count():", difference == 0)
        if difference:
            raise SystemExit(f"{difference} rows differ from Spark's answer")
        if args.hold:
            print(f"holding the cluster for {args.hold:.0f} s: {info['dashboard_url']}")
            time.sleep(args.hold)
    finally:
        actorrt.shutdown()
        spark.stop()


if __name__ == "__main__":
    main()
