"""Record lineage queries, answered from the lineage store without replaying anything.

``backward(record)``: the records it came from, stage by stage, down to the source records.
``forward(record)``: the records it went into, up to the flow's last stages. Each walks the flow a
stage at a time, with one read per operator instance a step reaches (``RelationReader``), so a
query costs round trips in the depth of the flow, not in the records it finds.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from actorrt.exceptions import ActorRTError
from actorrt.lineage import records
from actorrt.lineage.records import (
    CHANNEL0,
    HISTORY,
    MOVED,
    SELF,
    SOURCE,
    NamedRecord,
    RecordId,
    SourceRecord,
    TaskRelation,
)

Record = RecordId | SourceRecord | NamedRecord


class LineageNotFoundError(ActorRTError):
    """A query's record is unknown: no flow of that name captured record lineage, or it has no
    such record."""


@dataclass
class Trace:
    """What a query found: ``edges`` ``(record, origin)`` (backward) or ``(record, derived)``
    (forward); ``ends``: the source records (backward) or the records of the flow's last stages
    (forward); ``expired``: records whose relations are past the flow's retention (or were never
    captured), where the walk stopped."""

    start: Record
    edges: list[tuple[Record, Record]] = field(default_factory=list)
    ends: set[Record] = field(default_factory=set)
    expired: set[Record] = field(default_factory=set)

    @property
    def records(self) -> set[Record]:
        """Every record the query reached, the start's excluded."""
        return {b for _, b in self.edges}

    def chain(self) -> list[str]:
        """The edges as lines of text (what ``actorrt lineage`` prints)."""
        return [f"{a} <- {b}" for a, b in self.edges]


class _Flow:
    def __init__(self, flow: str, shape: dict[str, Any]) -> None:
        self.flow, self.stages = flow, shape["stages"]
        self.sources = {stage["source"]: s for s, stage in enumerate(self.stages) if stage["source"] is not None}
        # (stage, instance) -> [(consumer stage, channel there)]
        self.consumers: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
        for t, stage in enumerate(self.stages):
            for c, (s, i) in enumerate(stage["channels"]):
                self.consumers[(s, i)].append((t, c))

    def origin(self, stage: int, instance: int, origin: tuple[int, int]) -> Record:
        code, seq = origin
        if code == SOURCE:
            own = self.stages[stage]
            return SourceRecord(self.flow, own["source"], records.source_id_text(own["ids"], seq))
        if code == SELF:
            return RecordId(self.flow, stage, instance, seq)
        producer, p_instance = self.stages[stage]["channels"][code - CHANNEL0]
        return RecordId(self.flow, producer, p_instance, seq)

    def stage_index(self, until: str | int) -> int:
        if isinstance(until, int):
            return until
        for s, stage in enumerate(self.stages):
            if stage["name"] == until or stage["source"] == until:
                return s
        raise ValueError(f"flow {self.flow} has no stage {until!r}: its stages are {[s['name'] for s in self.stages]}")


async def _shape(reader: Any, flow: str) -> _Flow:
    shape = await reader.flow(flow)
    if shape is None:
        raise LineageNotFoundError(f"no record lineage of a flow {flow!r} in the lineage store (Dataflow(lineage=True) "
                                   f"captures it; RunResult.ids names the records)")
    return _Flow(flow, shape)


async def backward(reader: Any, record: RecordId, until: str | int = "source") -> Trace:
    """Where ``record`` came from: every record before it, down to the source records (or down to
    the records of stage ``until``, by index or name)."""
    flow = await _shape(reader, record.flow)
    stop = None if until == "source" else flow.stage_index(until)
    trace = Trace(record)
    seen: set[Record] = {record}
    frontier = [record]
    while frontier:
        found = await _relations(reader, flow, frontier)
        histories = await _histories(reader, flow, {
            key for r, rel in found.items() for o in rel.origins_of(r.seq - rel.first) if (key := _history_of(r, o))})
        later: list[RecordId] = []
        for r in frontier:
            rel = found.get(r)
            if rel is None:
                trace.expired.add(r)
                continue
            for origin in rel.resolved(r.seq - rel.first):
                if origin[0] in (HISTORY, MOVED):
                    key = _history_of(r, origin)
                    _, _, number = key
                    length = origin[-1]
                    kept = histories[key]
                    entries = [kept.entries.get(p) for p in range(kept.floor, length)]
                    if kept.floor > 0 or None in entries:
                        trace.expired.add(r)
                    refs = [(code, seq) for e in entries if e is not None for code, seqs in [e[1:]] for seq in seqs]
                else:
                    refs = [origin]
                for ref in refs:
                    o = flow.origin(r.stage, r.instance, ref)
                    trace.edges.append((r, o))
                    if o in seen:
                        continue
                    seen.add(o)
                    if isinstance(o, SourceRecord) or o.stage == stop:
                        trace.ends.add(o)
                    elif not flow.stages[o.stage]["captured"]:
                        trace.expired.add(o)
                    else:
                        later.append(o)
        frontier = later
    return trace


async def forward(reader: Any, record: Record) -> Trace:
    """What ``record`` (a source record, or any stage's) went into, up to the flow's last stages."""
    flow = await _shape(reader, record.flow)
    trace = Trace(record)
    seen: set[Record] = {record}
    frontier: list[Record] = [record]
    while frontier:
        later: list[RecordId] = []
        for r, derived in await _derived(reader, flow, frontier):
            trace.edges.append((r, derived))
            if derived in seen:
                continue
            seen.add(derived)
            if any(flow.stages[t]["captured"] for t, _ in flow.consumers[(derived.stage, derived.instance)]):
                later.append(derived)
            else:
                trace.ends.add(derived)
        frontier = later
    if not trace.edges and isinstance(record, RecordId):
        trace.ends.add(record)
    return trace


def _history_of(r: RecordId, origin: Any) -> tuple[int, int, int] | None:
    """The fold key history ``(stage, instance, key number)`` an origin of ``r`` points into."""
    if type(origin) is int:
        return None
    if origin[0] == HISTORY:
        return r.stage, r.instance, origin[1]
    if origin[0] == MOVED:
        return r.stage, origin[1], origin[2]
    return None


class _History:
    """A fold key's history: the first position kept, its entries (emitted, code, seqs) by
    position, and the records made of its state by no entry, with the length they come of."""

    def __init__(self, floor: int, fields: dict[bytes, bytes]) -> None:
        self.floor = floor
        self.entries = {int(f): records.read_history_entry(v) for f, v in fields.items() if f.isdigit()}
        self.made = [(int(f[2:]), int(v)) for f, v in fields.items() if f.startswith(b"x:")]


async def _relations(reader: Any, flow: _Flow, wanted: Iterable[RecordId]) -> dict[RecordId, TaskRelation]:
    """The relation of each of ``wanted`` that the store still has."""
    by_instance: dict[tuple[int, int], list[RecordId]] = defaultdict(list)
    for r in wanted:
        by_instance[(r.stage, r.instance)].append(r)
    answers = await asyncio.gather(*(reader.find(flow.flow, s, i, [r.seq for r in rs])
                                     for (s, i), rs in by_instance.items()))
    found: dict[RecordId, TaskRelation] = {}
    for rs, (floor, blobs) in zip(by_instance.values(), answers, strict=True):
        decoded: dict[bytes, TaskRelation] = {}
        for r, blob in zip(rs, blobs, strict=True):
            if blob is None or r.seq < floor:
                continue
            rel = decoded.get(blob) or decoded.setdefault(blob, records.decode(blob))
            if r.seq < rel.first + len(rel.origins):
                found[r] = rel
    return found


async def _histories(reader: Any, flow: _Flow,
                     wanted: set[tuple[int, int, int]]) -> dict[tuple[int, int, int], _History]:
    """The fold key histories ``(stage, instance, key number)``."""
    keys = sorted(wanted)
    answers = await asyncio.gather(*(reader.history(flow.flow, s, i, n) for s, i, n in keys))
    return {k: _History(*a) for k, a in zip(keys, answers, strict=True)}


async def _derived(reader: Any, flow: _Flow, frontier: list[Record]) -> list[tuple[Record, RecordId]]:
    """Per record of ``frontier``, the records it went into, at the next stages."""
    looks: list[tuple[Record, int, int, int, int]] = []  # (record, stage, instance, code, its seq there)
    for r in frontier:
        if isinstance(r, SourceRecord):
            s = flow.sources.get(r.source)
            if s is None:
                raise LineageNotFoundError(f"flow {flow.flow} has no source {r.source!r}")
            number = records.source_id_number(flow.stages[s]["ids"], r.id)
            looks += [(r, s, i, SOURCE, number) for i in range(flow.stages[s]["parallelism"])]
            continue
        for t, c in flow.consumers[(r.stage, r.instance)]:
            if flow.stages[t]["captured"]:
                looks += [(r, t, j, CHANNEL0 + c, r.seq) for j in range(flow.stages[t]["parallelism"])]
    by_instance: dict[tuple[int, int], list[tuple[Record, int, int]]] = defaultdict(list)
    for r, t, j, code, seq in looks:
        by_instance[(t, j)].append((r, code, seq))
    instances = list(by_instance)
    answers = await asyncio.gather(*(reader.forward(flow.flow, t, j, sorted({(code, records.bucket(seq))
                                                                             for _, code, seq in by_instance[(t, j)]}))
                                     for t, j in instances))
    out: list[tuple[Record, RecordId]] = []
    folded: list[tuple[Record, int, int, int, int]] = []  # (record, stage, instance, key number, from position)
    for (t, j), blobs_per_bucket in zip(instances, answers, strict=True):
        rels = {blob: records.decode(blob) for blobs in blobs_per_bucket for blob in blobs}.values()
        for r, code, seq in by_instance[(t, j)]:
            for rel in rels:
                positions = {p for p, v in enumerate(rel.in_seqs) if v == seq} if rel.code == code else set()
                for k in range(len(rel.origins)):
                    origins = rel.origins_of(k)
                    if any(o in positions if type(o) is int else (o[0] == code and o[1] == seq) for o in origins):
                        out.append((r, RecordId(flow.flow, t, j, rel.first + k)))
                folded += [(r, t, j, number, position) for number, position, taken in rel.folded
                           if positions.intersection(taken)]
    histories = await _histories(reader, flow, {(t, j, n) for _, t, j, n, _ in folded})
    for r, t, j, number, position in folded:  # every update of the key from this entry on
        kept = histories[(t, j, number)]
        for p, (emitted, _, _) in sorted(kept.entries.items()):
            if p >= position:
                out += [(r, RecordId(flow.flow, t, j, seq)) for seq in emitted]
        out += [(r, RecordId(flow.flow, t, j, seq)) for seq, length in kept.made if length > position]
    return out


async def walk_named(reader: Any, record: NamedRecord, forward: bool) -> Trace:
    """A named record's lineage (``actorrt.lineage.relate``): backward, the records it came from
    down to those that came from nothing related (``Trace.ends``); forward, the records made of
    it, up to those nothing was made of."""
    trace = Trace(record)
    seen: set[Record] = {record}
    frontier = [record]
    while frontier:
        by_namespace: dict[str, list[NamedRecord]] = defaultdict(list)
        for r in frontier:
            by_namespace[r.namespace].append(r)
        answers = await asyncio.gather(*(reader.named(ns, [r.name for r in rs], forward)
                                         for ns, rs in by_namespace.items()))
        later = []
        for rs, found in zip(by_namespace.values(), answers, strict=True):
            for r, names in zip(rs, found, strict=True):
                if not names and r != record:
                    trace.ends.add(r)
                for name in names:
                    other = NamedRecord(r.namespace, name)
                    trace.edges.append((r, other))
                    if other not in seen:
                        seen.add(other)
                        later.append(other)
        frontier = later
    return trace
