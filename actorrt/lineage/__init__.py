"""The lineage stash protocol as data structures (stash, specs, replay order, checkpoints) and the
fault-tolerance strategies that drive it; no sockets, so it is tested without them.

It also answers record lineage queries (``Dataflow(lineage=True)`` captures it):

    trace = actorrt.lineage.backward(result.ids[0])       # the source records an output came from
    trace.ends                                            # {SourceRecord(flow, "source0", 17), ...}
    actorrt.lineage.forward(SourceRecord(result.lineage, "source0", 17)).ends   # the outputs it affected

Plain actors name their records and relate them (inside a method, or in a driver)::

    actorrt.lineage.relate(NamedRecord("orders", f"total/{day}"), [("orders", f"raw/{i}") for i in ids])
    actorrt.lineage.backward(NamedRecord("orders", "total/2026-11-27")).ends
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from actorrt.lineage import queries
from actorrt.lineage.queries import LineageNotFoundError, Trace
from actorrt.lineage.records import NamedRecord, RecordId, SourceRecord

__all__ = ["LineageNotFoundError", "NamedRecord", "RecordId", "SourceRecord", "Trace", "backward", "forward",
           "relate"]

# Runs a query on this process's cluster: given a function of a reader (``RelationReader``) making
# the query's coroutine, its answer. The public API sets it (the layers below it know no driver).
_run: Callable[[Callable[[Any], Coroutine[Any, Any, Trace]], float | None], Trace] | None = None
# Queues a named relation on this process's flusher: (namespace, output, inputs, seconds kept).
_relate: Callable[[str, str, list[str], int], None] | None = None


def relate(output: NamedRecord | tuple[str, Any], inputs: Iterable[NamedRecord | tuple[str, Any]], *,
           keep_s: int | None = None) -> None:
    """Record that ``output`` came from ``inputs``: records a plain actor names itself, each a
    ``NamedRecord(namespace, name)`` or a ``(namespace, name)`` pair, all of one namespace. Written
    with the process's next lineage flush, as a dataflow's relations are, never on the task's
    path; a replay relates the same records again, which the store takes once. ``keep_s``: the
    relation is kept that many seconds after its last write (None: for good).

    Raises:
        ValueError: the records are of several namespaces, or ``keep_s`` is not a positive int.
    """
    out = _named(output)
    ins = [_named(i) for i in inputs]
    if any(i.namespace != out.namespace for i in ins):
        raise ValueError(f"relate() relates records of one namespace; {out} has inputs in "
                         f"{sorted({i.namespace for i in ins} - {out.namespace})}")
    if keep_s is not None and (isinstance(keep_s, bool) or not isinstance(keep_s, int) or keep_s < 1):
        raise ValueError(f"keep_s must be an int >= 1 (seconds) or None, not {keep_s!r}")
    if _relate is None:
        raise RuntimeError("actorrt.lineage.relate needs the runtime: import actorrt and call actorrt.init()")
    _relate(out.namespace, out.name, [i.name for i in ins], keep_s or 0)


def _named(record: Any) -> NamedRecord:
    if isinstance(record, NamedRecord):
        return record
    if isinstance(record, tuple) and len(record) == 2 and isinstance(record[0], str) and record[0]:
        return NamedRecord(record[0], str(record[1]))
    raise TypeError(f"a named record is NamedRecord(namespace, name) or a (namespace, name) pair, not {record!r}")


def backward(record: RecordId | NamedRecord, until: str | int = "source", *, timeout: float | None = 30.0) -> Trace:
    """The records ``record`` came from, stage by stage, down to the source records (or to the
    records of stage ``until``, by index or name), read from the lineage store; ``Trace.ends``
    holds the source records (a named record's: the records related to nothing before them).
    Needs ``actorrt.init()``."""
    if isinstance(record, NamedRecord):
        return _query(lambda reader: queries.walk_named(reader, record, forward=False), timeout)
    if not isinstance(record, RecordId):
        raise TypeError(f"backward() takes a RecordId (RunResult.ids has the outputs') or a NamedRecord, "
                        f"not {record!r}")
    return _query(lambda reader: queries.backward(reader, record, until), timeout)


def forward(record: RecordId | SourceRecord | NamedRecord, *, timeout: float | None = 30.0) -> Trace:
    """The records ``record`` went into, up to the flow's last stages (``Trace.ends``)."""
    if isinstance(record, NamedRecord):
        return _query(lambda reader: queries.walk_named(reader, record, forward=True), timeout)
    if not isinstance(record, (RecordId, SourceRecord)):
        raise TypeError(f"forward() takes a SourceRecord, a RecordId or a NamedRecord, not {record!r}")
    return _query(lambda reader: queries.forward(reader, record), timeout)


def _query(make: Callable[[Any], Coroutine[Any, Any, Trace]], timeout: float | None) -> Trace:
    if _run is None:
        raise RuntimeError("actorrt.lineage queries need the runtime: import actorrt and call actorrt.init()")
    return _run(make, timeout)
