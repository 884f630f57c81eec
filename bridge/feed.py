"""``feed``: a DataFrame into actors, one Arrow record batch per task, partition by partition.

The DataFrame is a Spark DataFrame, or a pandas DataFrame or Arrow table already in this process
(then it is cut into batches here, in row order, with no Spark at all).

Spark turns each partition into Arrow record batches in its Python workers (``mapInArrow``), cut
to ``batch_rows`` and, with a ``key``, split by a stable hash of the key (Spark's ``xxhash64``);
the driver then pulls one partition at a time (``toLocalIterator``), so the DataFrame is never
collected whole. Batches go round-robin over the handles, or to ``handles[hash % n]``, in
partition order: for a given DataFrame each actor gets the same batches in the same order every
time, so a replay after a failure is exact.
"""

from __future__ import annotations

import collections
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import actorrt
from actorrt import ActorHandle, ObjectRef
from actorrt.handles import ActorMethod
from bridge.errors import BridgeError
from bridge.spark import check_session, column_types, is_spark_dataframe, session_time_zone

_PART = "__actorrt_part"


@dataclass
class FeedSummary:
    """What ``feed`` sent: record batches and rows, in total and per actor (by handle order)."""

    batches: int = 0
    rows: int = 0
    per_actor: list[dict[str, int]] = field(default_factory=list)


def feed(df, handles: Sequence[ActorHandle], method: str | ActorMethod, batch_rows: int = 1024,
         key: str | None = None, max_in_flight: int = 8) -> FeedSummary:
    """Call ``handle.<method>(batch)`` for every Arrow record batch of ``df`` and wait until all
    calls ran; returns the counts.

    Args:
        df: a Spark DataFrame, a pandas DataFrame or a ``pyarrow.Table``.
        handles: the actors (or one).
        method: the method's name, or the method itself (``actor.process``).
        batch_rows: rows per batch at most: each call gets a ``pyarrow.RecordBatch``.
        key: a column: rows with equal keys go to the same actor (a stable hash of the key).
        max_in_flight: calls unanswered at a time, per actor (the next partition is read only as
            the oldest finish).

    Batches go out partition by partition, and there is no time order between partitions. A
    method error or an actor lost beyond recovery raises; every batch sent before it ran once.
    """
    return feed_marked(df, handles, method, batch_rows, key, max_in_flight, None)


def feed_marked(df, handles: Sequence[ActorHandle], method: str, batch_rows: int, key: str | None,
                max_in_flight: int, mark: tuple[str, int] | None) -> FeedSummary:
    """``feed``; with ``mark = (source, batch id)``, each call is applied at most once per actor
    whichever driver sends it: a micro-batch fed again (a restarted streaming query) is skipped
    where it was applied, as long as it has the same rows in the same partitions."""
    if is_spark_dataframe(df):
        check_session(df)
    method = method_name(method)
    handles = check_handles(handles, method)
    check_batching(batch_rows, key, max_in_flight)
    if is_spark_dataframe(df):
        columns = df.columns
        column_types(df.schema, session_time_zone(df.sparkSession))  # unsupported types fail here, before sending
        batches = _spark_batches(df, batch_rows, key, len(handles))
    else:
        table = _local_table(df)
        columns = table.column_names
        batches = _local_batches(table, batch_rows, key, len(handles))
    if key is not None and key not in columns:
        raise BridgeError(f"key column {key!r} is not in the DataFrame (columns: {', '.join(columns)})")

    summary = FeedSummary(per_actor=[{"batches": 0, "rows": 0} for _ in handles])
    in_flight: collections.deque[ObjectRef] = collections.deque()
    for target, batch in batches:
        if target is None:
            target = summary.batches % len(handles)
        if mark is None:
            in_flight.append(getattr(handles[target], method).remote(batch))
        else:
            seq = summary.per_actor[target]["batches"]
            in_flight.append(getattr(handles[target], method).remote_once(mark[0], mark[1], seq, batch))
        summary.batches += 1
        summary.rows += batch.num_rows
        summary.per_actor[target]["batches"] += 1
        summary.per_actor[target]["rows"] += batch.num_rows
        if len(in_flight) > max_in_flight * len(handles):
            actorrt.get(in_flight.popleft())  # raises the first failure, in order
    actorrt.get(list(in_flight))
    return summary


def spark_rows(df, batch_rows: int) -> Iterator[dict[str, Any]]:
    """The rows of Spark DataFrame ``df`` as dicts (column name to value), partition by partition
    in the order ``feed`` sends them: converted through Arrow in Spark's workers, ``batch_rows`` at
    a time, and pulled one partition at a time, so ``df`` is never collected whole."""
    check_session(df)
    for _, batch in _spark_batches(df, batch_rows, None, 1):
        yield from batch.to_pylist()


def method_name(method: str | ActorMethod) -> str:
    """The name of the method each batch is passed to: given, or that of ``actor.method``."""
    if isinstance(method, ActorMethod):
        return method.name
    if not isinstance(method, str):
        raise BridgeError(f"method must be the method's name or the method itself (actor.process), not {method!r}")
    return method


def check_batching(batch_rows: int, key: str | None, max_in_flight: int) -> None:
    for name, value in (("batch_rows", batch_rows), ("max_in_flight", max_in_flight)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise BridgeError(f"{name} must be an int >= 1, not {value!r}")
    if key is not None and not isinstance(key, str):
        raise BridgeError(f"key must be the name of a column (a str) or None, not {key!r}")


def check_handles(handles: Sequence[ActorHandle], method: str) -> list[ActorHandle]:
    if not isinstance(handles, ActorHandle | list | tuple):
        raise BridgeError(f"handles must be an actor handle or a list of them, not a {type(handles).__name__}")
    handles = [handles] if isinstance(handles, ActorHandle) else list(handles)
    if not handles:
        raise BridgeError("feed needs at least one actor handle")
    for h in handles:
        if not isinstance(h, ActorHandle):
            raise BridgeError(f"feed takes actor handles, got {type(h).__name__}")
        if method not in h.methods:
            raise BridgeError(f"actor class {h.class_name} has no method {method!r} (it has: {', '.join(h.methods)})")
    return handles


def _local_table(df) -> pa.Table:
    if isinstance(df, pa.RecordBatch):
        return pa.Table.from_batches([df])
    if isinstance(df, pa.Table):
        return df
    if type(df).__name__ == "DataFrame" and hasattr(df, "to_dict"):  # pandas, without importing it
        return pa.Table.from_pandas(df, preserve_index=False)
    raise BridgeError(f"feed takes a Spark DataFrame, a pandas DataFrame or a pyarrow Table, not a {type(df).__name__}")


def _local_batches(table: pa.Table, batch_rows: int, key: str | None,
                   n: int) -> Iterator[tuple[int | None, pa.RecordBatch]]:
    """``(target actor or None, batch)`` for a table in this process, in row order; with ``key``,
    rows go by a stable hash of the key's value (not Spark's: the actor a key goes to differs
    from a Spark DataFrame's feed)."""
    if key is None:
        for batch in table.to_batches(max_chunksize=batch_rows):
            yield None, batch
        return
    targets = pa.array([zlib.crc32(repr(k).encode()) % n for k in table.column(key).to_pylist()])
    for target in range(n):
        rows = table.filter(pc.equal(targets, target))
        for batch in rows.to_batches(max_chunksize=batch_rows):
            yield target, batch


def _spark_batches(df, batch_rows: int, key: str | None, n: int) -> Iterator[tuple[int | None, pa.RecordBatch]]:
    """``(target actor or None, batch)`` for ``df``, partition by partition."""
    from pyspark.sql import functions as sf

    columns = df.columns
    if key is not None:
        df = df.withColumn(_PART, sf.pmod(sf.xxhash64(sf.col(key)), sf.lit(n)))

    def to_ipc(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:  # in Spark's workers
        for batch in batches:
            if key is None:
                groups = [(-1, batch)]
            else:
                parts = batch.column(_PART)
                groups = [(int(p), batch.filter(pc.equal(parts, p)).select(columns))
                          for p in pc.unique(parts).to_pylist()]
            for part, group in groups:
                for offset in range(0, group.num_rows, batch_rows):
                    chunk = group.slice(offset, batch_rows)
                    sink = pa.BufferOutputStream()
                    with pa.ipc.new_stream(sink, chunk.schema) as writer:
                        writer.write_batch(chunk)
                    yield pa.RecordBatch.from_pydict({"part": [part], "ipc": [sink.getvalue().to_pybytes()]})

    for row in df.mapInArrow(to_ipc, "part long, ipc binary").toLocalIterator(prefetchPartitions=False):
        batch = pa.ipc.open_stream(row["ipc"]).read_next_batch()
        yield (None if row["part"] < 0 else row["part"]), batch
