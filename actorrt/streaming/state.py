"""Keyed state that does not grow for ever: per key a value, a time-to-live, and timers.

Pure logic, as ``logic.py`` is. Times are integer µs of the flow's time: the watermark in event
time, the operator's recorded clock in processing time. Expiry and timers are heaps ordered by
(time, a sequence number), so a replay that writes the same keys at the same times drops and fires
them in the same order; a key dropped or cleared leaves its old heap entries behind, and they are
skipped when they come up (cheaper than finding them).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any


@dataclass
class KeyedState:
    """``values[key]``, each dropped once it was not written for ``ttl_us`` (None: kept)."""

    ttl_us: int | None = None
    values: dict[Any, Any] = field(default_factory=dict)
    written: dict[Any, int] = field(default_factory=dict)  # key -> when it was last written (with a ttl)
    timers: dict[Any, set[int]] = field(default_factory=dict)  # key -> the times of its timers
    _expiry: list[tuple[int, int, Any]] = field(default_factory=list)  # (expires at, seq, key)
    _due: list[tuple[int, int, Any]] = field(default_factory=list)  # (fires at, seq, key)
    _seq: int = 0

    def __contains__(self, key: Any) -> bool:
        return key in self.values

    def __len__(self) -> int:
        return len(self.values)

    def put(self, key: Any, value: Any, at: int) -> None:
        """``key``'s value is ``value``, written at ``at`` (µs)."""
        self.values[key] = value
        if self.ttl_us is not None:
            last = self.written.get(key)
            if last is None or at > last:
                self.written[key] = at
                self._push(self._expiry, at + self.ttl_us, key)

    def clear(self, key: Any) -> None:
        """Drop ``key``'s value and its timers."""
        self.values.pop(key, None)
        self.written.pop(key, None)
        self.timers.pop(key, None)

    def expire(self, now: int) -> list[Any]:
        """Drop the keys not written since ``now`` less the ttl; returns them, oldest first."""
        dropped = []
        while self._expiry and self._expiry[0][0] <= now:
            at, _, key = heapq.heappop(self._expiry)
            last = self.written.get(key)
            if last is not None and last + self.ttl_us == at:  # not written since it was pushed
                self.values.pop(key, None)
                del self.written[key]
                dropped.append(key)
        return dropped

    def adopt(self, values: dict[Any, Any], written: dict[Any, int], timers: dict[Any, set[int]]) -> None:
        """Keys another instance held (a rescale, a savepoint): their values, when they were
        written and their timers, with their expiries and firings scheduled here."""
        self.values.update(values)
        for key, at in written.items():
            self.written[key] = at
            self._push(self._expiry, at + self.ttl_us, key)
        for key, times in timers.items():
            self.timers[key] = set(times)
            for at in sorted(times):
                self._push(self._due, at, key)

    def set_timer(self, key: Any, at: int) -> None:
        """Fire once for ``key`` at ``at`` (a second timer at the same time is the same timer)."""
        times = self.timers.setdefault(key, set())
        if at not in times:
            times.add(at)
            self._push(self._due, at, key)

    def next_due(self, now: float) -> tuple[int, Any] | None:
        """The first timer at or before ``now``, taken out (``(time, key)``), or None. One at a
        time, so that what firing it does (a key cleared, a timer set) counts for the next."""
        while self._due and self._due[0][0] <= now:
            at, _, key = heapq.heappop(self._due)
            times = self.timers.get(key)
            if times is None or at not in times:
                continue  # cleared
            times.discard(at)
            if not times:
                del self.timers[key]
            return at, key
        return None

    def _push(self, heap: list[tuple[int, int, Any]], at: int, key: Any) -> None:
        self._seq += 1
        heapq.heappush(heap, (at, self._seq, key))
