"""Rows per second from a Spark DataFrame through actors and back, against Spark alone.

A DataFrame of generated text lines is word-counted two ways, end to end:

- ``spark``: Spark's own ``explode(split(...)).groupBy("word").count()``, collected;
- ``actors``: ``bridge.feed`` to mapper actors (Arrow record batches of ``batch_rows`` lines),
  which send counts to nondeterministic reducer actors, then ``bridge.to_dataframe`` of the
  reducers' counts, collected: what a Spark user pays to run stateful millisecond actors on their
  data and get a DataFrame back.

Each configuration runs ``--repeat`` times on the same SparkSession (the first Spark run also warms
the JVM up and is dropped); the answers are checked equal. Writes JSON and a PNG, prints a table.

Run: ``python bench/spark_bridge.py [--lines 200000] [--batch-rows 256,1024,4096] [--ft lineage_stash,none]``.
"""

from __future__ import annotations

import datetime as _dt
import importlib.util
import json
import os
import platform
import random
import statistics
import time
from pathlib import Path

import click

import actorrt
import bridge  # before creating the SparkSession: Spark's workers then run this interpreter

# The example's mapper and reducer actors, measured here as users run them.
_spec = importlib.util.spec_from_file_location(
    "bridge_wordcount", Path(__file__).resolve().parents[1] / "examples" / "bridge_wordcount.py")
bridge_wordcount = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bridge_wordcount)
Mapper, Reducer = bridge_wordcount.Mapper, bridge_wordcount.Reducer


def _spark_count(lines) -> dict[str, int]:
    from pyspark.sql import functions as sf

    words = lines.select(sf.explode(sf.split("value", " ")).alias("word")).where("word != ''")
    return {r["word"]: r["count"] for r in words.groupBy("word").count().collect()}


def _actors_count(spark, lines, batch_rows: int, nodes: int) -> dict[str, int]:
    reducers = [Reducer.options(node=i % nodes).remote() for i in range(2 * nodes)]
    mappers = [Mapper.options(node=i % nodes, nondeterministic=False).remote(reducers) for i in range(2 * nodes)]
    bridge.feed(lines, mappers, "process", batch_rows=batch_rows)
    out = bridge.to_dataframe(spark, [r.rows for r in reducers], schema="word string, count long")
    return {r["word"]: r["count"] for r in out.collect()}


def _timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    labels = [r["config"] for r in rows]
    ax.bar(labels, [r["rows_per_s"] for r in rows], color=["grey" if r["config"] == "spark" else "C0" for r in rows])
    ax.set_ylabel("lines per second, end to end (median)")
    ax.set_title("Wordcount: Spark alone vs Spark -> actors -> Spark")
    plt.setp(ax.get_xticklabels(), rotation=20, ha="right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


@click.command()
@click.option("--lines", "num_lines", default=200_000, show_default=True, help="lines in the DataFrame")
@click.option("--batch-rows", "batch_text", default="256,1024,4096", show_default=True,
              help="rows per Arrow record batch sent to an actor, a list")
@click.option("--ft", "modes_text", default="lineage_stash,none", show_default=True, help="actorrt modes, a list")
@click.option("--nodes", default=2, show_default=True, help="actorrt node processes")
@click.option("--repeat", default=3, show_default=True, help="timed runs per configuration (median reported)")
@click.option("--out", "out_dir", default="bench/results", show_default=True, type=click.Path(file_okay=False))
def main(num_lines: int, batch_text: str, modes_text: str, nodes: int, repeat: int, out_dir: str) -> None:
    """Time a wordcount through the bridge against Spark doing it alone."""
    from pyspark.sql import SparkSession

    batch_sizes = [int(b) for b in batch_text.split(",") if b.strip()]
    modes = [m.strip() for m in modes_text.split(",") if m.strip()]
    spark = (SparkSession.builder.master("local[2]").appName("actorrt-bench-bridge")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    rng = random.Random(0)
    vocabulary = [f"w{i}" for i in range(2000)]
    lines = spark.createDataFrame([(" ".join(rng.choices(vocabulary, k=rng.randint(3, 12))),)
                                   for _ in range(num_lines)], "value string").repartition(4).cache()
    lines.count()

    results = []
    _spark_count(lines)  # warm-up
    times, expected = [], None
    for _ in range(repeat):
        elapsed, expected = _timed(lambda: _spark_count(lines))
        times.append(elapsed)
    results.append({"config": "spark", "ft": None, "batch_rows": None, "seconds": times})
    click.echo(f"spark alone: {statistics.median(times):.2f} s", err=True)
    for ft in modes:
        actorrt.init(num_nodes=nodes, ft=ft)
        try:
            for batch_rows in batch_sizes:
                times = []
                for _ in range(repeat):
                    elapsed, counts = _timed(lambda b=batch_rows: _actors_count(spark, lines, b, nodes))
                    if counts != expected:
                        raise SystemExit(f"actors ({ft}, {batch_rows} rows/batch) gave a different answer than Spark")
                    times.append(elapsed)
                results.append({"config": f"actors {ft} {batch_rows}", "ft": ft, "batch_rows": batch_rows,
                                "seconds": times})
                click.echo(f"actors, {ft}, {batch_rows} rows per batch: {statistics.median(times):.2f} s", err=True)
        finally:
            actorrt.shutdown()
    spark.stop()

    for r in results:
        r["median_s"] = statistics.median(r["seconds"])
        r["rows_per_s"] = num_lines / r["median_s"]
    spark_s = results[0]["median_s"]
    click.echo(f"wordcount of {num_lines} lines, end to end, median of {repeat}; {os.cpu_count()} cores")
    click.echo(f"{'config':<28}{'median s':>10}{'lines/s':>12}{'/ spark':>9}")
    for r in results:
        click.echo(f"{r['config']:<28}{r['median_s']:>10.2f}{r['rows_per_s']:>12.0f}{r['median_s'] / spark_s:>8.2f}x")

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    meta = {"lines": num_lines, "nodes": nodes, "repeat": repeat, "cpus": os.cpu_count(),
            "python": platform.python_version(), "time": stamp}
    (out / f"bridge-{stamp}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    _plot(results, out / f"bridge-{stamp}.png")
    click.echo(f"wrote {out}/bridge-{stamp}.json and .png")


if __name__ == "__main__":
    main()
