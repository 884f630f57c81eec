"""Exactly-once output to files from actors (paper §4.3, end-to-end exactly-once).

An actor keeps a ``FileSink`` in its state and awaits ``sink.write(data)`` in a method. Each write
first commits the running task's lineage, so any later replay re-runs this task at the same point
of the actor's order with the same inputs; the write then becomes file ``part-<n>``, ``n``
counting the sink's writes, created once and atomically. A replayed write finds its file with the
same bytes and leaves it alone, so readers never see a record twice, lose one, or see a file change.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from actorrt.api import commit_lineage
from actorrt.util.files import write_once


class FileSink:
    """Exactly-once files in ``directory`` (which must outlive the node: local disk of a machine
    whose nodes restart there, or a shared file system)."""

    suffix = ""

    def __init__(self, directory: str | Path) -> None:
        self.directory = str(directory)
        self.written = 0

    async def write(self, data: bytes) -> Path:
        """Commit the task's lineage, then write ``data`` as the next part file; returns its path."""
        await commit_lineage()
        self.written += 1
        path = Path(self.directory) / f"part-{self.written:010d}{self.suffix}"
        await asyncio.to_thread(write_once, path, data)
        return path


def read_parts(directory: str | Path) -> list[bytes]:
    """What a ``FileSink`` wrote to ``directory``, in write order (temporary files skipped)."""
    return [p.read_bytes() for p in sorted(Path(directory).glob("part-*"))]
