"""Sources an operator pulls from, and sinks it writes to, with exactly-once replay.

A pulled source is read in two steps, so that the lineage holds offsets, not records:

- ``next_range(after, limit)`` asks what is there now (nondeterministic: it is recorded with
  ``actorrt.record``, so a replay gets the same answer);
- ``read(range)`` returns the records of a range, the same every time (a replay reads them again).

A sink's ``write`` runs after the operator committed its task's lineage (so a replay writes the
same records at the same point) and is idempotent per (operator instance, write number).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import redis

from actorrt.lineage.records import entry_id_number

Range = tuple[Any, Any, int]  # (first, last, count): what next_range found


class Source(Protocol):
    """What an operator pulls records from."""

    def next_range(self, after: Any, limit: int) -> Range | None:
        """Up to ``limit`` records after position ``after`` (None: from the start), as a range;
        None if there are none now."""

    def read(self, found: Range) -> list[Any]:
        """The records of ``found``: the same on every call."""

    def ended(self, after: Any) -> bool:
        """Whether nothing will come after ``after``. (A source may also have ``poll_s``: how soon
        to ask again when nothing is there, and ``read_with_ids(range)``: the records with the IDs
        record lineage names them by, as ints; else they are numbered in the order read.)"""


class Sink(Protocol):
    """Where a stream's records go (``Stream.sink``). A sink whose ``exactly_once`` is False (a
    metrics file, a log) is written without committing the task's lineage first: a replay may
    write again."""

    def write(self, writer: str, number: int, records: list[Any]) -> None:
        """Write ``records`` as write ``number`` of ``writer``, once however often called. A
        writer numbers its writes 1, 2, 3..., each made after the one before returned."""


class ListSource:
    """The records of a list, pulled in ranges: for tests and examples (it never changes)."""

    def __init__(self, records: Sequence[Any]) -> None:
        self.records = list(records)

    def next_range(self, after: int | None, limit: int) -> Range | None:
        start = 0 if after is None else after + 1
        last = min(start + limit, len(self.records)) - 1
        return (start, last, last - start + 1) if last >= start else None

    def read(self, found: Range) -> list[Any]:
        first, last, _ = found
        return self.records[first:last + 1]

    def read_with_ids(self, found: Range) -> tuple[list[Any], range]:
        """The records of ``found`` and their offsets in the list."""
        return self.read(found), range(found[0], found[1] + 1)

    def ended(self, after: int | None) -> bool:
        return (0 if after is None else after + 1) >= len(self.records)


class _Redis:
    """A lazily opened client (operators are pickled into checkpoints; connections are not)."""

    def __init__(self, url: str, stream: str) -> None:
        self.url, self.stream = url, stream
        self._client: redis.Redis | None = None

    @property
    def client(self) -> redis.Redis:
        if self._client is None:
            self._client = redis.Redis.from_url(self.url)
        return self._client

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None}


class RedisStreamSource(_Redis):
    """Entries of a Redis stream, from ``start_after`` on (entry IDs are the offsets in the
    lineage). The flow ends after ``count`` entries, or never (``count=None``). An entry becomes the
    record ``decode(fields)`` (by default its ``v`` field, JSON-decoded)."""

    def __init__(self, url: str, stream: str, *, count: int | None = None, start_after: str | None = None,
                 decode: Callable[[dict[bytes, bytes]], Any] | None = None) -> None:
        super().__init__(url, stream)
        self.count, self.start_after = count, start_after
        self.decode = decode or (lambda fields: json.loads(fields[b"v"]))
        self.taken = 0  # entries handed out so far (the operator's state keeps this object)

    def next_range(self, after: str | None, limit: int) -> Range | None:
        if self.count is not None:
            limit = min(limit, self.count - self.taken)
            if limit <= 0:
                return None
        found = self.client.xrange(self.stream, min=f"({after or self.start_after or '0-0'}", count=limit)
        if not found:
            return None
        return found[0][0].decode(), found[-1][0].decode(), len(found)

    def read(self, found: Range) -> list[Any]:
        return [self.decode(fields) for _, fields in self._entries(found)]

    def read_with_ids(self, found: Range) -> tuple[list[Any], list[int]]:
        """The records of ``found`` and their entry IDs (as ``records.entry_id_number`` ints)."""
        entries = self._entries(found)
        return [self.decode(fields) for _, fields in entries], [entry_id_number(i.decode()) for i, _ in entries]

    def _entries(self, found: Range) -> list[tuple[bytes, dict[bytes, bytes]]]:
        first, last, count = found
        entries = self.client.xrange(self.stream, min=first, max=last)
        if len(entries) != count:
            raise LookupError(f"stream {self.stream} lost entries {first}..{last} (trimmed?): a replay "
                              f"needs them as they were read")
        self.taken += count
        return entries

    def ended(self, after: str | None) -> bool:
        return self.count is not None and self.taken >= self.count


# KEYS = stream, written-marks hash; ARGV = writer, write number, then one value per entry. A
# writer numbers its writes 1, 2, 3... and makes each only after the one before, so one number per
# writer (the last written) says which were: a replayed write is a no-op, all in one atomic step,
# and the hash holds a field per writer, however many writes there were.
_WRITE_ONCE = """
local last = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if tonumber(ARGV[2]) <= last then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
for i = 3, #ARGV do
  redis.call('XADD', KEYS[1], '*', 'v', ARGV[i])
end
return #ARGV - 2
"""


class RedisStreamSink(_Redis):
    """Appends each record to a Redis stream (field ``v``: ``encode(record)``, JSON by default),
    exactly once: the hash ``<stream>:written`` keeps each writer's last write number, set in the
    same atomic step as the appends (a field per writer, not per write)."""

    def __init__(self, url: str, stream: str, *, encode: Callable[[Any], str | bytes] | None = None) -> None:
        super().__init__(url, stream)
        self.encode = encode or json.dumps
        self._script: Any = None

    def write(self, writer: str, number: int, records: list[Any]) -> None:
        if self._script is None:
            self._script = self.client.register_script(_WRITE_ONCE)
        self._script(keys=[self.stream, f"{self.stream}:written"],
                     args=[writer, number, *(self.encode(r) for r in records)])

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "_script": None}


def read_with_ids(source: Any, found: Range, read_before: int) -> tuple[list[Any], Sequence[int]]:
    """The records of ``found`` and their IDs: the source's own, or their places in the order
    its operator read them (``read_before`` records before these)."""
    if hasattr(source, "read_with_ids"):
        return source.read_with_ids(found)
    batch = source.read(found)
    return batch, range(read_before, read_before + len(batch))


def id_kind(source: Any) -> str:
    """How record lineage shows a pulled source's record IDs (``records.source_id_text``)."""
    return "entry" if isinstance(source, RedisStreamSource) else "offset"


def read_stream(url: str, stream: str, decode: Callable[[dict[bytes, bytes]], Any] | None = None) -> list[Any]:
    """Every record of a stream, in order (what a ``RedisStreamSink`` wrote there)."""
    decode = decode or (lambda fields: json.loads(fields[b"v"]))
    client = redis.Redis.from_url(url)
    try:
        return [decode(fields) for _, fields in client.xrange(stream)]
    finally:
        client.close()
