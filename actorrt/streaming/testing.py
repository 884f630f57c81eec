"""Helpers for exactly-once tests of dataflows: fail an operator's node at a chosen record."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any


class KillNodeAt:
    """A ``map`` step that passes records through and SIGKILLs the node process running it when
    its operator instance reaches its ``at``-th record, once: the file ``marker`` remembers, so
    the replay of that instance goes past record ``at`` (and so do other instances). With
    ``after``, not before that file exists either (a global checkpoint was taken, say): then at
    the first record past both."""

    def __init__(self, at: int, marker: str | Path, after: str | Path | None = None) -> None:
        if at < 1:
            raise ValueError(f"at counts records from 1, not {at!r}")
        self.at, self.marker, self.seen = at, str(marker), 0
        self.after = None if after is None else str(after)

    def __call__(self, record: Any) -> Any:
        self.seen += 1
        if self.at and self.seen >= self.at and (self.after is None or Path(self.after).exists()):
            self.at = 0  # (a restored or replayed instance looks once more, and finds the marker)
            try:
                Path(self.marker).touch(exist_ok=False)
            except FileExistsError:
                return record
            os.kill(os.getpid(), signal.SIGKILL)
        return record
