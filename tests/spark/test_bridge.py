"""The PySpark bridge with a real local SparkSession and a real cluster: DataFrames in, results
out, checked against Spark computing the same answer on its own."""

from __future__ import annotations

import collections
import random
import subprocess
import sys
import threading
import time
import zlib

import pandas as pd
import pyarrow as pa
import pytest
from pyspark.sql import Row

import actorrt
import bridge


@actorrt.remote
class Counts:
    """A nondeterministic reducer: word counts from many mappers, in arrival order."""

    def __init__(self):
        self.counts = collections.Counter()

    def add(self, counts):
        self.counts.update(counts)

    def rows(self):
        return [{"word": w, "count": c} for w, c in sorted(self.counts.items())]


@actorrt.remote
class Mapper:
    """Takes Arrow record batches of lines; returns once its reducers applied what it sent."""

    def __init__(self, reducers):
        self.reducers = reducers

    async def process(self, batch: pa.RecordBatch):
        parts = [collections.Counter() for _ in self.reducers]
        for line in batch.column("line").to_pylist():
            for word in line.split():
                parts[zlib.crc32(word.encode()) % len(parts)][word] += 1
        refs = [r.add.remote(dict(p)) for r, p in zip(self.reducers, parts, strict=True) if p]
        for ref in refs:
            await ref
        return batch.num_rows


@actorrt.remote
class Collector:
    def __init__(self):
        self.batches = []

    def take(self, batch: pa.RecordBatch):
        self.batches.append(batch.column("user").to_pylist())

    def seen(self):
        return self.batches


@actorrt.remote
class TableWriter:
    """Appends word counts to a Parquet table, exactly once, as they arrive from many mappers."""

    def __init__(self, directory):
        self.sink = bridge.ParquetSink(directory)

    async def write(self, rows):
        await self.sink.write(rows)


@actorrt.remote
class CountingMapper:
    def __init__(self, writer):
        self.writer = writer

    async def process(self, batch: pa.RecordBatch):
        counts = collections.Counter(w for line in batch.column("line").to_pylist() for w in line.split())
        await self.writer.write.remote([{"word": w, "count": c} for w, c in sorted(counts.items())])


def _kill_once_busy(node: int, tasks: int) -> None:
    """SIGKILL ``node`` once its actors ran ``tasks`` more tasks than now: in the middle of a feed."""

    def executed() -> int:
        return sum(a["executed"] for n in actorrt.stats()["nodes"] if n["node"] == node for a in n["actors"])

    start = executed()
    while executed() < start + tasks:
        time.sleep(0.05)
    actorrt.kill_node(node)


def _lines(spark, seed: int, n: int = 3000):
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(300)]
    rows = [(" ".join(rng.choices(vocabulary, k=rng.randint(1, 10))),) for _ in range(n)]
    return spark.createDataFrame(rows, "line string").repartition(3)


def _spark_wordcount(df) -> dict[str, int]:
    from pyspark.sql import functions as sf

    words = df.select(sf.explode(sf.split("line", " ")).alias("word")).where(sf.col("word") != "")
    return {r["word"]: r["count"] for r in words.groupBy("word").count().collect()}


def _wordcount_through_actors(spark, df, chaos=None) -> tuple[bridge.FeedSummary, dict[str, int]]:
    reducers = [Counts.options(node=i % 2).remote() for i in range(3)]
    mappers = [Mapper.options(node=i % 2, nondeterministic=False).remote(reducers) for i in range(2)]
    thread = threading.Thread(target=chaos) if chaos else None
    if thread:
        thread.start()
    summary = bridge.feed(df, mappers, "process", batch_rows=100)
    if thread:
        thread.join()
    out = bridge.to_dataframe(spark, [r.rows for r in reducers], schema="word string, count long")
    return summary, {r["word"]: r["count"] for r in out.collect()}


def test_a_wordcount_fed_from_a_dataframe_equals_sparks_own(spark, cluster):
    df = _lines(spark, seed=1)
    summary, counts = _wordcount_through_actors(spark, df)
    assert summary.rows == df.count() == 3000
    assert summary.batches >= 30 and sum(a["rows"] for a in summary.per_actor) == 3000
    assert counts == _spark_wordcount(df)


def test_feeding_by_key_sends_each_key_to_one_actor_in_the_same_order_every_time(spark, cluster):
    rng = random.Random(7)
    df = spark.createDataFrame([(rng.randrange(50), i) for i in range(2000)], "user long, i long").repartition(4)

    def run() -> list[list[list[int]]]:
        collectors = [Collector.remote() for _ in range(3)]
        summary = bridge.feed(df, collectors, "take", batch_rows=64, key="user")
        assert summary.rows == 2000
        return actorrt.get([c.seen.remote() for c in collectors], timeout=60)

    first, second = run(), run()
    assert first == second  # the same batches, in the same order, per actor
    keys = [{u for batch in seen for u in batch} for seen in first]
    assert sum(len(k) for k in keys) == len(set().union(*keys)) == 50  # each key at exactly one actor
    assert all(len(batch) <= 64 for seen in first for batch in seen)


def test_bad_input_is_a_clear_error_and_sends_nothing(spark, cluster):
    df = _lines(spark, seed=2, n=10)
    collector = Collector.remote()
    with pytest.raises(bridge.BridgeError, match="key column 'nope'"):
        bridge.feed(df, [collector], "take", key="nope")
    with pytest.raises(bridge.BridgeError, match="no method 'absent'"):
        bridge.feed(df, [collector], "absent")
    with pytest.raises(bridge.BridgeError, match="at least one actor"):
        bridge.feed(df, [], "take")
    with pytest.raises(bridge.BridgeError, match="batch_rows"):
        bridge.feed(df, [collector], "take", batch_rows=0)
    intervals = spark.sql("select make_interval(1, 2) as every, 'x' as line")
    with pytest.raises(bridge.BridgeError, match="column 'every' has type interval"):
        bridge.feed(intervals, [collector], "take")
    with pytest.raises(bridge.BridgeError, match="need a schema"):
        bridge.to_dataframe(spark, [(1, "a")])
    with pytest.raises(bridge.BridgeError, match="no rows"):
        bridge.to_dataframe(spark, [])
    # Each argument of the bridge's functions, wrong, is named with what it may be.
    wrong = [
        (lambda: bridge.feed(df, [collector], "take", max_in_flight=0), "max_in_flight must be an int >= 1, not 0"),
        (lambda: bridge.feed(df, [collector], "take", key=3), "key must be the name of a column"),
        (lambda: bridge.feed(df, [collector], 7), "method must be the method's name or the method itself"),
        (lambda: bridge.feed(df, "collector", "take"), "handles must be an actor handle or a list of them, not a str"),
        (lambda: bridge.feed([1, 2], [collector], "take"), "feed takes a Spark DataFrame, a pandas DataFrame or a "
                                                           "pyarrow Table, not a list"),
        (lambda: bridge.to_dataframe(df, []), "to_dataframe takes the SparkSession first, not a DataFrame"),
        (lambda: bridge.to_dataframe(spark, [{"a": 1}], schema=5), "schema must be a StructType or a DDL string"),
        (lambda: bridge.stream(df, [collector], "take", "cp"), r"stream\(\) takes a streaming Spark DataFrame "
                                                              r"\(spark.readStream...\), not a batch one: use feed"),
        (lambda: bridge.stream(pd.DataFrame({"a": [1]}), [collector], "take", "cp"), "not a pandas DataFrame"),
    ]
    streaming = spark.readStream.format("rate").load()
    wrong += [
        (lambda: bridge.stream(streaming, [collector], "take", None), "checkpoint_location must be a path or URI"),
        (lambda: bridge.stream(streaming, [collector], "take", "cp", trigger="1 second"), "trigger must be a dict"),
        (lambda: bridge.stream(streaming, [collector], "take", "cp", batch_rows=-1), "batch_rows must be an int"),
    ]
    for call, message in wrong:
        with pytest.raises(bridge.BridgeError, match=message):
            call()
    assert actorrt.get(collector.seen.remote(), timeout=30) == []


def test_to_dataframe_takes_refs_batches_rows_and_tables(spark, cluster):
    batch = pa.RecordBatch.from_pydict({"word": ["a", "b"], "count": [1, 2]})
    counts = Counts.remote()
    counts.add.remote({"c": 3})
    sources = [batch, pa.Table.from_batches([batch]), counts.rows.remote(), {"word": "d", "count": 4}]
    out = bridge.to_dataframe(spark, sources)
    assert sorted((r["word"], r["count"]) for r in out.collect()) == [
        ("a", 1), ("a", 1), ("b", 2), ("b", 2), ("c", 3), ("d", 4)]
    # Columns come from every row, and a schema matches them by name.
    ragged = bridge.to_dataframe(spark, [{"a": 1}, {"a": 2, "b": "x"}])
    assert sorted(ragged.collect(), key=lambda r: r["a"]) == [Row(a=1, b=None), Row(a=2, b="x")]
    named = bridge.to_dataframe(spark, [{"count": 5, "word": "e"}], schema="word string, count long")
    assert [tuple(r) for r in named.collect()] == [("e", 5)]
    assert bridge.to_dataframe(spark, [], schema="word string, count long").count() == 0


def test_a_wordcount_fed_through_the_bridge_survives_a_node_kill(spark, cluster):
    df = _lines(spark, seed=3, n=6000)

    summary, counts = _wordcount_through_actors(spark, df, lambda: _kill_once_busy(1, tasks=10))
    recovery = next(n for n in actorrt.stats()["nodes"] if n["node"] == 1)["recoveries"]
    assert summary.rows == 6000
    assert counts == _spark_wordcount(df)
    assert len(recovery) == 1 and recovery[0]["tasks_replayed"] > 0, recovery


def test_a_parquet_table_written_by_actors_is_exactly_once_across_a_node_kill(spark, cluster, tmp_path):
    df = _lines(spark, seed=4, n=6000)
    writer = TableWriter.options(node=1).remote(str(tmp_path / "counts"))
    mappers = [CountingMapper.options(node=0).remote(writer) for _ in range(2)]

    thread = threading.Thread(target=_kill_once_busy, args=(1, 10))
    thread.start()
    summary = bridge.feed(df, mappers, "process", batch_rows=100)
    thread.join()
    table = spark.read.parquet(str(tmp_path / "counts"))
    assert table.count() > 0 and summary.batches == len(list((tmp_path / "counts").glob("part-*.parquet")))
    written = {r["word"]: r["total"] for r in table.groupBy("word").agg({"count": "sum"})
               .withColumnRenamed("sum(count)", "total").collect()}
    assert written == _spark_wordcount(df)  # a part written twice or lost would show here


def test_a_streaming_wordcount_applies_a_micro_batch_once_when_spark_runs_it_again(spark, cluster, tmp_path):
    inbox, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    inbox.mkdir()
    rng = random.Random(5)
    for i in range(3):
        (inbox / f"part-{i}.txt").write_text("\n".join(" ".join(rng.choices("abcdefgh", k=5)) for _ in range(400)))
    expected = _spark_wordcount(spark.read.text(str(inbox)).withColumnRenamed("value", "line"))
    reducers = [Counts.remote() for _ in range(2)]
    mappers = [Mapper.options(nondeterministic=False).remote(reducers) for _ in range(2)]

    def run_query() -> None:
        lines = spark.readStream.option("maxFilesPerTrigger", 1).text(str(inbox)).withColumnRenamed("value", "line")
        query = bridge.stream(lines, mappers, "process", str(checkpoint), batch_rows=100)
        query.processAllAvailable()
        query.stop()

    def counts() -> dict[str, int]:
        rows = actorrt.get([r.rows.remote() for r in reducers], timeout=60)
        return {row["word"]: row["count"] for part in rows for row in part}

    def calls() -> int:
        return sum(a["executed"] for n in actorrt.stats()["nodes"] for a in n["actors"]
                   if a["actor_id"] in {m.actor_id.hex() for m in mappers})

    run_query()
    assert counts() == expected
    # As after a crash between applying a micro-batch and committing it: Spark runs it again.
    commits = checkpoint / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)  # Spark's checksum of it
    before = calls()
    run_query()
    assert calls() > before, "Spark did not run the micro-batch again"
    assert counts() == expected  # not applied twice
    with pytest.raises(bridge.BridgeError, match="takes a streaming Spark DataFrame"):
        bridge.stream(spark.read.text(str(inbox)), mappers, "process", str(checkpoint))


def test_a_stopped_spark_session_is_a_clear_error(tmp_path):
    """In a process of its own: stopping this run's SparkSession would end it for the other tests."""
    script = tmp_path / "stopped.py"
    script.write_text(
        "import bridge\n"
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false').getOrCreate()\n"
        "df = spark.createDataFrame([('a b',)], 'line string')\n"
        "spark.stop()\n"
        "try:\n"
        "    bridge.feed(df, [], 'process')\n"
        "except bridge.BridgeError as exc:\n"
        "    print('BridgeError:', exc)\n"
        "try:\n"
        "    bridge.to_dataframe(spark, [{'a': 1}])\n"
        "except bridge.BridgeError as exc:\n"
        "    print('BridgeError:', exc)\n"
    )
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.count("SparkSession is stopped") == 2, run.stdout


def test_a_streaming_wordcount_survives_a_node_kill(spark, cluster, tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    rng = random.Random(6)
    for i in range(8):
        (inbox / f"part-{i}.txt").write_text("\n".join(" ".join(rng.choices("abcdefghij", k=6)) for _ in range(500)))
    expected = _spark_wordcount(spark.read.text(str(inbox)).withColumnRenamed("value", "line"))
    reducers = [Counts.options(node=i % 2).remote() for i in range(2)]
    mappers = [Mapper.options(node=i % 2, nondeterministic=False).remote(reducers) for i in range(2)]
    killer = threading.Thread(target=_kill_once_busy, args=(1, 10))
    killer.start()
    lines = spark.readStream.option("maxFilesPerTrigger", 1).text(str(inbox)).withColumnRenamed("value", "line")
    query = bridge.stream(lines, mappers, "process", str(tmp_path / "checkpoint"), batch_rows=100)
    query.processAllAvailable()
    query.stop()
    killer.join()
    rows = actorrt.get([r.rows.remote() for r in reducers], timeout=60)
    assert {row["word"]: row["count"] for part in rows for row in part} == expected


@actorrt.remote
class Keeper:
    """Keeps the record batches it is fed, whole."""

    def __init__(self):
        self.kept = []

    def take(self, batch: pa.RecordBatch):
        self.kept.append(batch)
        return batch.num_rows

    def batches(self):
        return self.kept


def test_every_arrow_type_spark_has_feeds_and_comes_back_unchanged(spark, cluster):
    import datetime
    import decimal

    df = spark.sql("""
        select id,
               timestamp'2026-03-29 01:30:00' + make_interval(0, 0, 0, 0, id, 0, 0) as ts,
               timestamp_ntz'2026-03-29 01:30:00' as ntz,
               date'2026-02-28' + cast(id as int) as day,
               cast(id * 1.25 as decimal(10, 2)) as price,
               array(cast(id as int), 2) as arr,
               named_struct('a', cast(id as int), 'b', concat('s', id)) as st,
               map('k', cast(id as int)) as m
        from range(40)""").repartition(3)
    keeper = Keeper.remote()
    assert bridge.feed(df, [keeper], keeper.take, batch_rows=16).rows == 40  # the method itself, too
    back = bridge.to_dataframe(spark, keeper.batches.remote(), schema=df.schema)
    assert sorted(back.collect()) == sorted(df.collect())
    first = sorted(back.collect())[0]
    assert isinstance(first["ts"], datetime.datetime) and first["price"] == decimal.Decimal("0.00")


def test_feed_takes_pandas_and_arrow_tables_too(spark, cluster):
    import pandas as pd

    frame = pd.DataFrame({"user": [i % 7 for i in range(100)], "i": range(100)})
    keepers = [Keeper.remote() for _ in range(3)]
    assert bridge.feed(frame, keepers, "take", batch_rows=10, key="user").rows == 100
    seen = [actorrt.get(k.batches.remote(), timeout=30) for k in keepers]
    users = [{u for b in kept for u in b.column("user").to_pylist()} for kept in seen]
    assert sum(map(len, users)) == len(set().union(*users)) == 7  # each key at exactly one actor
    assert sorted(i for kept in seen for b in kept for i in b.column("i").to_pylist()) == list(range(100))
    assert bridge.feed(pa.Table.from_pandas(frame), keepers[0], "take", batch_rows=50).batches == 2
    with pytest.raises(bridge.BridgeError, match="feed takes a Spark DataFrame, a pandas DataFrame or a pyarrow "
                                                 "Table, not a list"):
        bridge.feed([1, 2], keepers, "take")


def test_to_dataframe_says_what_it_drops_and_refuses_what_it_would_change(spark, cluster):
    rows = [{"word": "a", "count": 1, "extra": True}]
    with pytest.warns(UserWarning, match="leaves out column\\(s\\) extra"):
        out = bridge.to_dataframe(spark, rows, schema="word string, count long")
    assert [tuple(r) for r in out.collect()] == [("a", 1)]
    with pytest.raises(bridge.BridgeError, match="column 'count' holds int64 values, but the schema says string"):
        bridge.to_dataframe(spark, [{"count": 1}], schema="count string")
    with pytest.raises(bridge.BridgeError, match="column 'small': its int64 values do not fit the schema's tinyint"):
        bridge.to_dataframe(spark, [{"small": 1000}], schema="small tinyint")


def test_spark_workers_without_pyarrow_are_one_clear_error(tmp_path):
    """A session created before ``import bridge`` runs its Python workers with another Python: here
    one that has no pyarrow (this interpreter without site-packages)."""
    worker = tmp_path / "python-without-site"
    worker.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    worker.chmod(0o755)
    script = tmp_path / "late_import.py"
    script.write_text(
        "import os\n"
        f"os.environ['PYSPARK_PYTHON'] = {str(worker)!r}\n"
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false').getOrCreate()\n"
        "spark.sparkContext.setLogLevel('OFF')\n"
        "import bridge\n"
        "df = spark.createDataFrame([('a b',)], 'line string')\n"
        "try:\n"
        "    bridge.feed(df, [], 'process')\n"
        "except bridge.BridgeError as exc:\n"
        "    print('BridgeError:', exc)\n"
    )
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    [line] = [line for line in run.stdout.splitlines() if line.startswith("BridgeError")]
    assert "cannot run the bridge: ModuleNotFoundError: No module named 'pyarrow'" in line, run.stdout
    assert "Import bridge before creating the SparkSession" in line


def test_to_dataframe_reads_wall_clock_times_in_the_session_zone_and_decodes_categoricals(spark, cluster):
    import datetime

    import pandas as pd
    from pyspark.sql.types import LongType, StructField, StructType

    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        noon = datetime.datetime(2024, 1, 1, 12, 0, 0, 123456)
        out = bridge.to_dataframe(spark, [{"t": noon, "d": datetime.date(2024, 1, 1)}],
                                  schema="t timestamp, d timestamp")
        expected = spark.sql("select timestamp'2024-01-01 12:00:00.123456' as t, timestamp'2024-01-01' as d")
        assert out.collect() == expected.collect()  # as Spark reads the same wall-clock times
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    categorical = pd.DataFrame({"w": pd.Categorical(["a", "b", "a"])})
    assert [r["w"] for r in bridge.to_dataframe(spark, categorical, schema="w string").collect()] == ["a", "b", "a"]
    with pytest.raises(bridge.BridgeError, match="column 'n' holds 1 null\\(s\\), but the schema says it has none"):
        bridge.to_dataframe(spark, [{"n": None}], schema=StructType([StructField("n", LongType(), nullable=False)]))
