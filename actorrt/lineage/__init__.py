"""The lineage stash protocol as data structures (stash, specs, replay order, checkpoints) and the
fault-tolerance strategies that drive it; no sockets, so it is tested without them.

It also answers record lineage queries (``Dataflow(lineage=True)`` captures it):

    trace = actorrt.lineage.backward(result.ids[0])       # the source records an output came from
    trace.ends                                            # {SourceRecord(flow, "source0", 17), ...}
    actorrt.lineage.forward(SourceRecord(result.lineage, "source0", 17)).ends   # the outputs it affected
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from actorrt.lineage import queries
from actorrt.lineage.queries import LineageNotFoundError, Trace
from actorrt.lineage.records import RecordId, SourceRecord

__all__ = ["LineageNotFoundError", "RecordId", "SourceRecord", "Trace", "backward", "forward"]

# Runs a query on this process's cluster: given a function of a reader (``RelationReader``) making
# the query's coroutine, its answer. The public API sets it (the layers below it know no driver).
_run: Callable[[Callable[[Any], Coroutine[Any, Any, Trace]], float | None], Trace] | None = None


def backward(record: RecordId, until: str | int = "source", *, timeout: float | None = 30.0) -> Trace:
    """The records ``record`` came from, stage by stage, down to the source records (or to the
    records of stage ``until``, by index or name), read from the lineage store; ``Trace.ends``
    holds the source records. Needs ``actorrt.init()``."""
    if not isinstance(record, RecordId):
        raise TypeError(f"backward() takes a RecordId (RunResult.ids has the outputs'), not {record!r}")
    return _query(lambda reader: queries.backward(reader, record, until), timeout)


def forward(record: RecordId | SourceRecord, *, timeout: float | None = 30.0) -> Trace:
    """The records ``record`` went into, up to the flow's last stages (``Trace.ends``)."""
    if not isinstance(record, (RecordId, SourceRecord)):
        raise TypeError(f"forward() takes a SourceRecord or a RecordId, not {record!r}")
    return _query(lambda reader: queries.forward(reader, record), timeout)


def _query(make: Callable[[Any], Coroutine[Any, Any, Trace]], timeout: float | None) -> Trace:
    if _run is None:
        raise RuntimeError("actorrt.lineage queries need the runtime: import actorrt and call actorrt.init()")
    return _run(make, timeout)
