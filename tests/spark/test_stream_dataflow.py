"""Spark Structured Streaming feeding an ``actorrt.streaming.Dataflow`` (``bridge.stream``), with a
real local SparkSession and a real cluster: word counts equal a plain-Python count of the same
input, through a node kill and through a micro-batch that Spark runs twice."""

from __future__ import annotations

import collections
import json
import os
import random
from pathlib import Path

import pytest

import actorrt
import bridge
from actorrt.streaming import Dataflow, RecordError


def _write_file(inbox: Path, number: int, seed: int, lines: int = 300) -> list[str]:
    """JSON lines ``{"line": ...}`` as ``part-<number>.json``, whole when Spark sees it (written
    under a name starting with a dot, which Spark skips, then renamed); returns the lines."""
    rng = random.Random(seed * 1000 + number)
    text = [" ".join(rng.choices("abcdefghij", k=rng.randint(1, 6))) for _ in range(lines)]
    hidden = inbox / f".part-{number}.json"
    hidden.write_text("\n".join(json.dumps({"line": line}) for line in text))
    os.replace(hidden, inbox / f"part-{number}.json")
    return text


def _oracle(lines: list[str]) -> collections.Counter:
    return collections.Counter(word for line in lines for word in line.split())


def _wordcount() -> Dataflow:
    flow = Dataflow("spark-wordcount", batch_size=40, max_in_flight=4)
    (flow.source(bridge.SPARK, parallelism=2)
     .flat_map(lambda row: row["line"].split())
     .key_by(lambda word: word)
     .fold(lambda: 0, lambda n, word: n + 1, parallelism=2)
     .collect())
    return flow


def _lines(spark, inbox: Path):
    return spark.readStream.schema("line string").option("maxFilesPerTrigger", 1).json(str(inbox))


def _final(updates) -> dict:
    """The last count of each word (each key's updates come from one instance, in its order)."""
    return dict(updates)


def _records_in(result, stage: int) -> int:
    return sum(op["in"] for op in result.operators if op["stage"] == stage)


def test_a_streaming_wordcount_through_a_dataflow_equals_the_oracle(spark, cluster, tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    lines = [line for i in range(3) for line in _write_file(inbox, i, seed=1)]
    query = bridge.stream(_lines(spark, inbox), _wordcount(), checkpoint_location=str(tmp_path / "checkpoint"))
    query.processAllAvailable()
    assert query.isActive
    result = query.stop()
    assert not query.isActive
    assert _final(result.outputs) == _oracle(lines)
    assert _records_in(result, 0) == len(lines)  # each row fed once, as one record
    assert query.query.lastProgress["batchId"] == 2  # one micro-batch per file


def test_counts_stay_exact_when_the_node_of_a_count_operator_is_killed_between_micro_batches(spark, cluster,
                                                                                              tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    flow = _wordcount()
    lines = [line for i in range(3) for line in _write_file(inbox, i, seed=2)]
    query = bridge.stream(_lines(spark, inbox), flow, checkpoint_location=str(tmp_path / "checkpoint"))
    query.processAllAvailable()
    counter = flow.actors[2]  # stages: two source instances, then the two count instances
    replayed_before = _tasks_replayed(counter.slot)
    actorrt.kill_node(counter.slot)
    lines += [line for i in range(3, 6) for line in _write_file(inbox, i, seed=2)]
    query.processAllAvailable()
    result = query.stop()
    assert _final(result.outputs) == _oracle(lines)  # every word counted once: exactly-once through the kill
    assert _tasks_replayed(counter.slot) > replayed_before  # the counts were rebuilt by replay


def _tasks_replayed(node: int) -> int:
    return sum(r["tasks_replayed"] for n in actorrt.stats()["nodes"] if n["node"] == node for r in n["recoveries"])


def test_a_micro_batch_spark_runs_again_is_applied_once(spark, cluster, tmp_path):
    inbox, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    inbox.mkdir()
    lines = [line for i in range(3) for line in _write_file(inbox, i, seed=3)]
    flow = _wordcount()
    first = bridge.stream(_lines(spark, inbox), flow, checkpoint_location=str(checkpoint))
    first.processAllAvailable()
    first.query.stop()  # the query only: the flow runs on, as under a restarted query
    # As after a crash between feeding a micro-batch and committing it: Spark runs it again.
    commits = checkpoint / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)  # Spark's checksum of it
    sources = {a.actor_id.hex() for a in flow.actors[:2]}
    before = _executed(sources)

    again = bridge.stream(_lines(spark, inbox), first.flow, checkpoint_location=str(checkpoint))
    again.processAllAvailable()
    assert again.query.lastProgress["batchId"] == last, "Spark did not run the micro-batch again"
    assert _executed(sources) > before  # fed again, and skipped where applied
    result = again.stop()
    assert _records_in(result, 0) == len(lines)  # not applied twice
    assert _final(result.outputs) == _oracle(lines)


def _executed(actor_ids: set[str]) -> int:
    return sum(a["executed"] for n in actorrt.stats()["nodes"] for a in n["actors"] if a["actor_id"] in actor_ids)


def test_bad_input_is_a_clear_error_and_starts_nothing(spark, cluster, tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    lines = _lines(spark, inbox)
    own_source = Dataflow("own")
    own_source.source(["a b"]).collect()
    no_source = Dataflow("none")
    flow = _wordcount()
    checkpoint = str(tmp_path / "checkpoint")
    wrong = [
        (lambda: bridge.stream(lines, flow, checkpoint), r"takes no method: its first stage takes the rows \(did "
                                                         r"you mean checkpoint_location='.*checkpoint'\?\)"),
        (lambda: bridge.stream(lines, flow, "process", checkpoint), "stream\\(\\) to a Dataflow takes no method"),
        (lambda: bridge.stream(lines, flow, checkpoint_location=checkpoint, batch_rows=10),
         "batch_rows, key and max_in_flight are for actor handles"),
        (lambda: bridge.stream(lines, own_source, checkpoint_location=checkpoint),
         r"feeds a Dataflow built on flow.source\(bridge.SPARK\)"),
        (lambda: bridge.stream(lines, no_source, checkpoint_location=checkpoint),
         r"feeds a Dataflow built on flow.source\(bridge.SPARK\)"),
        (lambda: bridge.stream(lines, flow), "checkpoint_location must be a path or URI, not None"),
        (lambda: bridge.stream(spark.range(3), flow, checkpoint_location=checkpoint),
         "takes a streaming Spark DataFrame"),
        (lambda: bridge.stream(lines, "flow", "process", checkpoint),
         "feeds a Dataflow .* or actor handles, not a str"),
        (lambda: bridge.stream(lines.selectExpr("make_interval(1, 2) as every"), flow, checkpoint_location=checkpoint),
         "column 'every' has type interval"),
    ]
    for call, message in wrong:
        with pytest.raises(bridge.BridgeError, match=message):
            call()
    assert spark.streams.active == [] and flow.actors == []  # no query started, no operator deployed
    with pytest.raises(ValueError, match="is fed"):
        flow.run()
    with pytest.raises(ValueError, match="reads its source\\(iterable\\) with run\\(\\)"):
        own_source.start()

    query = bridge.stream(lines, flow, checkpoint_location=checkpoint)
    query.stop()
    with pytest.raises(bridge.BridgeError, match="the running flow was finished"):
        bridge.stream(lines, query.flow, checkpoint_location=checkpoint)


def test_an_operator_error_fails_the_query_and_stop_raises_it(spark, cluster, tmp_path):
    from pyspark.errors import StreamingQueryException

    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "numbers.json").write_text("\n".join(json.dumps({"n": n}) for n in ["1", "2", "x", "4"]))
    flow = Dataflow("strict", batch_size=2)
    flow.source(bridge.SPARK).map(lambda row: int(row["n"])).collect()
    numbers = spark.readStream.schema("n string").json(str(inbox))
    query = bridge.stream(numbers, flow, checkpoint_location=str(tmp_path / "checkpoint"))
    with pytest.raises(StreamingQueryException):
        query.processAllAvailable()
    assert not query.isActive
    with pytest.raises(RecordError, match="raised ValueError on record {'n': 'x'}"):
        query.stop()


def test_the_lineage_of_a_streaming_querys_counts_as_a_dataframe_names_the_rows_counted(spark, cluster, tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    flow = Dataflow("spark-lineage", batch_size=16, lineage=True)
    (flow.source(bridge.SPARK)
     .flat_map(lambda row: row["line"].split())
     .key_by(lambda word: word)
     .fold(lambda: 0, lambda n, word: n + 1, parallelism=2)
     .collect())
    query = bridge.stream(_lines(spark, inbox), flow, checkpoint_location=str(tmp_path / "checkpoint"))
    batches = []  # micro-batch id -> its lines, in order: a file each, written after the last was read
    for i in range(2):
        batches.append(_write_file(inbox, i, seed=3, lines=40))
        query.processAllAvailable()
    result = query.stop()
    last = {word: k for k, (word, _) in enumerate(result.outputs)}  # each word's final count
    frame = bridge.lineage_frame(spark, [result.ids[k] for k in last.values()])
    assert frame.columns[:2] == ["record", "stage"]
    rows = collections.defaultdict(set)
    for row in frame.collect():
        assert row["source"] == "source0" and not row["expired"]
        rows[row["record"]].add((row["batch_id"], row["row"]))
    for word, k in last.items():
        lines = [batches[b][r] for b, r in rows[str(result.ids[k])]]
        assert sum(line.split().count(word) for line in lines) == result.outputs[k][1]
        assert len(lines) == sum(word in line.split() for batch in batches for line in batch)
