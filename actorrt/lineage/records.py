"""Record-level data lineage as data: record IDs, and how one task's output records relate to the
records they came from, in the compact form the lineage store keeps. No sockets.

Every output record of an operator instance is numbered by that instance (``seq``, 0, 1, 2...,
part of its state, so a replay numbers them alike): ``RecordId(flow, stage, instance, seq)``. A
source record keeps the ID its source gives it (an offset, a stream entry ID, a row index):
``SourceRecord(flow, source, id)``.

A task's relation names, for each output record in order, its *origins*: one origin, or a list
of them, each

- an ``int``: the position of a record in the task's own input batch (a map, a filter), whose IDs
  the relation lists once (``in_seqs``, from sender ``code``);
- ``(code, seq)``: a record from an earlier task (a window's records), where ``code`` is ``SOURCE``
  (a source record's ID), ``SELF`` (this instance's own output ``seq``) or a channel (``channel +
  CHANNEL0``: the sending instance's output ``seq``);
- ``(HISTORY, key_number, length)``: the first ``length`` entries of a fold key's history, each a
  task that folded records into the key: every record folded into it so far. A task's ``folded``
  says which of its input positions went into which key, at which place in its history;
- ``(MOVED, instance, key_number, length)``: the same at another instance of the stage, which held
  the key before a rescale moved it here.

``encode`` writes it with ``marshal`` (C speed) and zlib; ``FORMAT`` is its version.
"""

from __future__ import annotations

import marshal
import zlib
from collections.abc import Sequence
from typing import Any, NamedTuple

FORMAT = 1
ZLIB_LEVEL = 1  # (the fastest: ints of a batch are close to each other, and squeeze to a third)
SOURCE, SELF, HISTORY, CHANNEL0 = 0, 1, 2, 3
MOVED = -1  # (MOVED, instance, key number, length): a fold key's history at the instance it left (a rescale)
# Forward lookups find the tasks that took a record by its sender and this bucket of its ID.
BUCKET_BITS = 12


class RecordId(NamedTuple):
    """An output record of instance ``instance`` of stage ``stage``: its ``seq``-th."""

    flow: str
    stage: int
    instance: int
    seq: int

    def __str__(self) -> str:
        return f"{self.flow}/{self.stage}/{self.instance}/{self.seq}"


class SourceRecord(NamedTuple):
    """A record of source ``source`` (its name in the flow), by the ID its source gives it."""

    flow: str
    source: str
    id: Any

    def __str__(self) -> str:
        return f"{self.flow}/{self.source}/{self.id}"


class NamedRecord(NamedTuple):
    """A record a plain actor names itself (``actorrt.lineage.relate``): ``name`` in ``namespace``."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}:{self.name}"


Origin = int | tuple[int, int] | tuple[int, int, int]


class TaskRelation(NamedTuple):
    """One task's outputs ``first`` .. ``first + len(origins) - 1`` and their origins; the input
    batch came from sender ``code`` with IDs ``in_seqs``; ``folded``: which input positions went
    into which fold key's history, as ``(key number, position in its history, [positions])``."""

    first: int
    code: int
    in_seqs: list[int]
    origins: list[Any]  # per output: one origin, or a list of them (as encoded; ``origins_of``)
    folded: list[tuple[int, int, list[int]]]

    def origins_of(self, i: int) -> list[Origin]:
        """Output ``first + i``'s origins, as a list."""
        o = self.origins[i]
        return o if type(o) is list else [o]

    def resolved(self, i: int) -> list[tuple[int, int] | tuple[int, int, int]]:
        """Output ``first + i``'s origins with batch positions made ``(code, seq)``."""
        return [(self.code, self.in_seqs[o]) if type(o) is int else o for o in self.origins_of(i)]


def encode(first: int, code: int, in_seqs: Sequence[int], origins: list[Any],
           folded: Sequence[tuple[int, int, list[int]]] = ()) -> bytes:
    """A task's relation; ``origins``: per output, one origin or a list of them (plain ints,
    tuples and lists: what ``marshal`` takes)."""
    return zlib.compress(marshal.dumps((FORMAT, first, code, list(in_seqs), origins, list(folded))), ZLIB_LEVEL)


def decode(blob: bytes) -> TaskRelation:
    version, first, code, in_seqs, origins, folded = marshal.loads(zlib.decompress(blob))
    if version != FORMAT:
        raise ValueError(f"record lineage in format {version}; this version reads format {FORMAT}")
    return TaskRelation(first, code, in_seqs, origins, folded)


def history_entry(emitted: Sequence[int], code: int, seqs: Sequence[int]) -> bytes:
    """One entry of a fold key's history: the records a task folded into the key (their sender
    ``code`` and IDs) and the records it emitted of the key then (none: a final fold's, or a
    filter's)."""
    return marshal.dumps((list(emitted), code, list(seqs)))


def read_history_entry(entry: bytes) -> tuple[list[int], int, list[int]]:
    return marshal.loads(entry)


def bucket(seq: int) -> int:
    return seq >> BUCKET_BITS


def entry_id_number(entry_id: str) -> int:
    """A Redis stream entry ID (``"<ms>-<n>"``) as one increasing int (what relations hold)."""
    ms, _, n = entry_id.partition("-")
    return (int(ms) << 20) | int(n)


def entry_id_text(number: int) -> str:
    return f"{number >> 20}-{number & 0xFFFFF}"


def marked_row_number(batch_id: int, row: int) -> int:
    """Row ``row`` of micro-batch ``batch_id`` (a fed flow under a streaming query's marks)."""
    return (batch_id << 32) | row


def source_id_text(kind: str, number: int) -> Any:
    """How a source names the record its relation holds as ``number``: an int for offsets and
    rows, an entry ID string for Redis streams, ``(batch_id, row)`` for marked micro-batches."""
    if kind == "entry":
        return entry_id_text(number)
    if kind == "marked":
        return number >> 32, number & 0xFFFFFFFF
    return number


def source_id_number(kind: str, source_id: Any) -> int:
    if kind == "entry":
        return entry_id_number(source_id)
    if kind == "marked":
        batch_id, row = source_id
        return marked_row_number(batch_id, row)
    return int(source_id)
