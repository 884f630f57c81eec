"""``lineage_frame``: record lineage as a Spark DataFrame, for the notebook user.

One row per (record asked about, record at the end of its lineage): backward, each output with
every source record it came from; forward, each source record with every output it went into.
Source IDs are columns a join with the input takes: ``row`` (an offset or a row index, or the row
within ``batch_id``'s micro-batch for a streaming query's records) and ``entry_id`` (a Redis stream's).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import actorrt
from actorrt.lineage import RecordId, SourceRecord
from bridge.errors import BridgeError
from bridge.frames import to_dataframe

SCHEMA = ("record string, stage int, instance int, seq long, source string, row long, batch_id long, "
          "entry_id string, expired boolean")


def lineage_frame(spark, records: Iterable[RecordId | SourceRecord],
                  direction: Literal["backward", "forward"] = "backward", *, timeout: float | None = 30.0):
    """A DataFrame of the lineage of ``records`` (``RunResult.ids``, or ``SourceRecord``s going
    forward): ``record`` (the one asked about, as text), then the other end: a stage's record
    (``stage``, ``instance``, ``seq``) or a source record (``source`` and its ID columns);
    ``expired``: the walk from ``record`` stopped at relations past the flow's retention."""
    if direction not in ("backward", "forward"):
        raise BridgeError(f"direction is 'backward' or 'forward', not {direction!r}")
    query = actorrt.lineage.backward if direction == "backward" else actorrt.lineage.forward
    rows: list[dict[str, Any]] = []
    for record in records:
        trace = query(record, timeout=timeout)
        for end in sorted(trace.ends, key=str):
            rows.append({"record": str(record), **_columns(end), "expired": bool(trace.expired)})
    return to_dataframe(spark, rows, SCHEMA)


def _columns(end: RecordId | SourceRecord) -> dict[str, Any]:
    columns: dict[str, Any] = dict.fromkeys(("stage", "instance", "seq", "source", "row", "batch_id", "entry_id"))
    if isinstance(end, RecordId):
        columns.update(stage=end.stage, instance=end.instance, seq=end.seq)
        return columns
    columns["source"] = end.source
    if isinstance(end.id, tuple):
        columns["batch_id"], columns["row"] = end.id
    elif isinstance(end.id, str):
        columns["entry_id"] = end.id
    else:
        columns["row"] = end.id
    return columns
