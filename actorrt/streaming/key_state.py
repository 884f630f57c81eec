"""Keyed state that moves between operator instances: a savepoint resumed at another parallelism
(and, later, a rescale while the flow runs). Pure logic, as ``logic.py`` is.

``take_keys`` takes some keys out of an instance's ``StageLogic`` as a ``KeySlice``: per key its
value, when it was written (a time-to-live), its timers, a final fold's newest time, its windows
and sessions, and an interval join's kept records. ``give_keys`` puts a slice into another
instance, rebuilding the expiry, timer and eviction heaps from it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from actorrt.lineage.records import MOVED
from actorrt.streaming.logic import StageLogic

_BY_WINDOW = ("windows", "window_origins")  # fields by (window start, key)


@dataclass
class KeySlice:
    """The state of some keys of one stage (each dict is by key, ``windows`` by (start, key))."""

    values: dict[Any, Any] = field(default_factory=dict)
    written: dict[Any, int] = field(default_factory=dict)
    timers: dict[Any, set[int]] = field(default_factory=dict)
    fold_times: dict[Any, int] = field(default_factory=dict)
    windows: dict[tuple[int, Any], Any] = field(default_factory=dict)
    sessions: dict[Any, list[list[Any]]] = field(default_factory=dict)
    joined: dict[Any, tuple[list[Any], list[Any]]] = field(default_factory=dict)
    # Capturing record lineage: a fold key's histories at the instances that held it, as
    # (MOVED, instance, key number, length), and a window's records.
    histories: dict[Any, list[tuple[int, int, int, int]]] = field(default_factory=dict)
    window_origins: dict[tuple[int, Any], list[tuple[int, int]]] = field(default_factory=dict)

    def merge(self, other: KeySlice) -> None:
        """Add ``other``'s keys (no key is in both: each had one owner)."""
        for f in fields(self):
            getattr(self, f.name).update(getattr(other, f.name))

    def without_lineage(self) -> KeySlice:
        """This slice, its record lineage left out (a savepoint: the resumed run is another flow
        in the lineage store, where these IDs would name other records)."""
        self.histories, self.window_origins = {}, {}
        self.joined = {key: ([(t, r, None) for t, r, _ in lefts], [(t, r, None) for t, r, _ in rights])
                       for key, (lefts, rights) in self.joined.items()}
        return self

    def chunks(self, keys_each: int) -> list[KeySlice]:
        """This slice in pieces of ``keys_each`` keys (at least one piece), in the order its keys
        first appear (the same in a replay)."""
        order: dict[Any, int] = {}
        for f in fields(self):
            for k in getattr(self, f.name):
                order.setdefault(k[1] if f.name in _BY_WINDOW else k, len(order))
        return self.split(lambda key: order[key] // keys_each, max(1, math.ceil(len(order) / keys_each)))

    def split(self, owner: Callable[[Any], int], parts: int) -> list[KeySlice]:
        """This slice cut in ``parts``, each key into part ``owner(key)``."""
        out = [KeySlice() for _ in range(parts)]
        for f in fields(self):
            for k, v in getattr(self, f.name).items():
                key = k[1] if f.name in _BY_WINDOW else k
                getattr(out[owner(key)], f.name)[k] = v
        return out


def take_keys(logic: StageLogic, wanted: Callable[[Any], bool], instance: int = 0) -> KeySlice:
    """Take the keys ``wanted`` says out of ``logic`` (instance ``instance``): it no longer holds
    them (what its heaps still say of them is skipped when it comes up, as for a key cleared)."""
    out = KeySlice()
    history = logic.history
    for key in [k for k in set(history.numbers) | set(history.carried) if wanted(k)]:
        number = history.numbers.pop(key, None)
        here = [] if number is None else [(MOVED, instance, number, history.lengths[number])]
        out.histories[key] = here + history.carried.pop(key, [])
    for k in [k for k in logic.window_origins if wanted(k[1])]:
        out.window_origins[k] = logic.window_origins.pop(k)
    state = logic.state
    for key in [k for k in state.values if wanted(k)]:
        out.values[key] = state.values.pop(key)
    for key in [k for k in state.written if wanted(k)]:
        out.written[key] = state.written.pop(key)
    for key in [k for k in state.timers if wanted(k)]:
        out.timers[key] = state.timers.pop(key)
    for key in [k for k in logic.fold_times if wanted(k)]:
        out.fold_times[key] = logic.fold_times.pop(key)
    for k in [k for k in logic.windows if wanted(k[1])]:
        out.windows[k] = logic.windows.pop(k)
    for key in [k for k in logic.sessions if wanted(k)]:
        out.sessions[key] = logic.sessions.pop(key)
    if logic.joined is not None:
        for key in [k for k in logic.joined.kept if wanted(k)]:
            out.joined[key] = logic.joined.kept.pop(key)
    return out


def give_keys(logic: StageLogic, keys: KeySlice) -> None:
    """Put ``keys`` into ``logic`` (which holds none of them), with their expiries, timers and
    join evictions scheduled again (and the lineage of a fold key's updates here goes on into its
    histories where it was)."""
    logic.history.carried.update(keys.histories)
    logic.window_origins.update(keys.window_origins)
    logic.state.adopt(keys.values, keys.written, keys.timers)
    logic.fold_times.update(keys.fold_times)
    logic.windows.update(keys.windows)
    logic.sessions.update(keys.sessions)
    if keys.joined:
        logic.joined.adopt(keys.joined)
