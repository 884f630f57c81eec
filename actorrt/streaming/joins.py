"""Joins of two keyed inputs: pure logic, as ``logic.py`` is.

- A **window join** is a window whose state is both sides' records of the key in that window:
  when the window closes, it emits every pair. Its state lives exactly as long as the window.
- An **interval join** pairs a left record at ``tl`` with each right record of its key at ``tr``
  in ``[tl - before, tl + after]``, as soon as the second of the two arrives. A record is kept
  only while a record still to come can match it (records to come are at or after the
  watermark, or late): so its state is bounded by the interval and the disorder.

Both emit ``(key, left, right)``; an interval join's pair takes the later of the two times.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

LEFT, RIGHT = 0, 1


def window_join_init() -> tuple[list[Any], list[Any]]:
    return [], []


def window_join_add(state: tuple[list[Any], list[Any]], tagged: tuple[int, Any]) -> tuple[list[Any], list[Any]]:
    side, record = tagged
    state[side].append(record)
    return state


def window_join_merge(a: tuple[list[Any], list[Any]], b: tuple[list[Any], list[Any]]) -> tuple[list[Any], list[Any]]:
    return a[LEFT] + b[LEFT], a[RIGHT] + b[RIGHT]


def window_join_pairs(key: Any, state: tuple[list[Any], list[Any]]) -> list[tuple[Any, Any, Any]]:
    lefts, rights = state
    return [(key, left, right) for left in lefts for right in rights]


@dataclass
class IntervalJoin:
    """The records an interval join keeps, per key and side: ``(time µs, record)`` in arrival order."""

    before: int  # µs: a right record matches from this long before a left one's time...
    after: int  # ...to this long after it
    kept: dict[Any, tuple[list[tuple[int, Any]], list[tuple[int, Any]]]] = field(default_factory=dict)
    _ends: list[tuple[int, int, Any]] = field(default_factory=list)  # (no use after, seq, key)
    _seq: int = 0

    def add(self, key: Any, side: int, t: int, record: Any) -> tuple[list[tuple[Any, Any, Any]], list[int]]:
        """A record of ``side`` at ``t``: the pairs it makes with those kept, and their times."""
        lefts, rights = self.kept.setdefault(key, ([], []))
        if side == LEFT:
            low, high = t - self.before, t + self.after
            matches = [(key, record, right) for tr, right in rights if low <= tr <= high]
            times = [max(t, tr) for tr, _ in rights if low <= tr <= high]
            lefts.append((t, record))
            self._push(high, key)
        else:
            low, high = t - self.after, t + self.before
            matches = [(key, left, record) for tl, left in lefts if low <= tl <= high]
            times = [max(t, tl) for tl, _ in lefts if low <= tl <= high]
            rights.append((t, record))
            self._push(high, key)
        return matches, times

    def evict(self, mark: float) -> None:
        """Records still to come are at or after ``mark``: forget those no such record matches."""
        swept = set()  # each key's records are looked at once per move, however many are due
        while self._ends and self._ends[0][0] < mark:
            _, _, key = heapq.heappop(self._ends)
            kept = self.kept.get(key)
            if kept is None or key in swept:
                continue
            swept.add(key)
            lefts = [(t, r) for t, r in kept[LEFT] if t + self.after >= mark]
            rights = [(t, r) for t, r in kept[RIGHT] if t + self.before >= mark]
            if lefts or rights:
                self.kept[key] = (lefts, rights)
            else:
                del self.kept[key]

    def __len__(self) -> int:
        """Records kept."""
        return sum(len(lefts) + len(rights) for lefts, rights in self.kept.values())

    def _push(self, end: int, key: Any) -> None:
        self._seq += 1
        heapq.heappush(self._ends, (end, self._seq, key))
