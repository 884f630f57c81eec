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
    """The records an interval join keeps, per key and side: ``(time µs, record, ref)`` in
    arrival order (``ref``: the record's ID where record lineage is captured, else None)."""

    before: int  # µs: a right record matches from this long before a left one's time...
    after: int  # ...to this long after it
    kept: dict[Any, tuple[list[tuple[int, Any]], list[tuple[int, Any]]]] = field(default_factory=dict)
    _ends: list[tuple[int, int, Any]] = field(default_factory=list)  # (no use after, seq, key)
    _seq: int = 0

    def add(self, key: Any, side: int, t: int, record: Any,
            ref: Any = None) -> tuple[list[tuple[Any, Any, Any]], list[int], list[Any]]:
        """A record of ``side`` at ``t``: the pairs it makes with those kept, their times, and
        the other records' refs."""
        lefts, rights = self.kept.setdefault(key, ([], []))
        if side == LEFT:
            low, high = t - self.before, t + self.after
            found = [(tr, right, r) for tr, right, r in rights if low <= tr <= high]
            matches = [(key, record, right) for _, right, _ in found]
            lefts.append((t, record, ref))
        else:
            low, high = t - self.after, t + self.before
            found = [(tl, left, r) for tl, left, r in lefts if low <= tl <= high]
            matches = [(key, left, record) for _, left, _ in found]
            rights.append((t, record, ref))
        self._push(high, key)
        return matches, [max(t, other) for other, _, _ in found], [r for _, _, r in found]

    def evict(self, mark: float) -> None:
        """Records still to come are at or after ``mark``: forget those no such record matches."""
        swept = set()  # each key's records are looked at once per move, however many are due
        while self._ends and self._ends[0][0] < mark:
            _, _, key = heapq.heappop(self._ends)
            kept = self.kept.get(key)
            if kept is None or key in swept:
                continue
            swept.add(key)
            lefts = [kept_ for kept_ in kept[LEFT] if kept_[0] + self.after >= mark]
            rights = [kept_ for kept_ in kept[RIGHT] if kept_[0] + self.before >= mark]
            if lefts or rights:
                self.kept[key] = (lefts, rights)
            else:
                del self.kept[key]

    def adopt(self, kept: dict[Any, tuple[list[Any], list[Any]]]) -> None:
        """Keys another instance kept records of (a rescale, a savepoint), with their evictions
        scheduled here."""
        for key, (lefts, rights) in kept.items():
            self.kept[key] = (list(lefts), list(rights))
            for t, *_ in lefts:
                self._push(t + self.after, key)
            for t, *_ in rights:
                self._push(t + self.before, key)

    def __len__(self) -> int:
        """Records kept."""
        return sum(len(lefts) + len(rights) for lefts, rights in self.kept.values())

    def _push(self, end: int, key: Any) -> None:
        self._seq += 1
        heapq.heappush(self._ends, (end, self._seq, key))
