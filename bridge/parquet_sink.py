"""An exactly-once Parquet table written by actors, readable by Spark (``spark.read.parquet``).

Each write is one Parquet file, made by ``actorrt.sinks.FileSink``: the task's lineage is committed
first, so a replay after a node kill writes the same rows into the same ``part-N.parquet``, which
then already exists with those bytes and is left alone. Readers never see a row twice or lose one.
Temporary files start with a dot, which Spark skips.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from actorrt.sinks import FileSink
from bridge.frames import table_of_dicts


class ParquetSink(FileSink):
    """Keep one in an actor's state; ``await sink.write(rows)`` in its methods."""

    suffix = ".parquet"

    async def write(self, rows: pa.Table | pa.RecordBatch | list[dict[str, Any]]) -> Path:
        """Append ``rows`` (a table, a record batch, or dicts) as the next file of the table."""
        if isinstance(rows, pa.RecordBatch):
            rows = pa.Table.from_batches([rows])
        elif not isinstance(rows, pa.Table):
            rows = table_of_dicts(list(rows))
        out = pa.BufferOutputStream()
        pq.write_table(rows, out)  # deterministic bytes for the same rows: a replay rewrites none
        return await super().write(out.getvalue().to_pybytes())
