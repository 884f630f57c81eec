"""Scaling a keyed stage while the flow runs (``RunningFlow.rescale``): one instance's part of the
move, as pure logic, no actors.

Keys go to instances by ``keys.partition(key, parallelism)``. Going from ``old`` to ``new``
instances, a key moves when its owner changes. The move, with no stage stopped:

1. every producer of the stage switches to the new routing, in a task of its own (so a replay of
   it routes as the first run did), and then tells every old instance so (``handover``): on that
   channel, nothing more comes for keys the old instance gives up;
2. an old instance that heard it from all its producers takes the keys that leave it out of its
   state (``key_state.take_keys``: values, windows, timers) and hands each new owner its part
   (``adopt``), ``HANDOFF_KEYS`` keys at a time, each piece a task of its own: between pieces it
   processes the records of the keys it keeps. An instance beyond the new parallelism then
   retires: its consumers count its channel as finished;
3. meanwhile an instance holds the records of the keys it is to receive, per old owner, until that
   owner's part arrives, then processes them in arrival order (in processing time, as arriving
   then). Records of every other key go through at once. Every instance of the stage defers
   watermark moves until its part of the move is over, so that no held record becomes late.

Which old instance hands to which new one is arithmetic: a key whose owner is ``i`` among ``old``
and ``j`` among ``new`` exists exactly when ``i`` and ``j`` are equal modulo the gcd of the two.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from actorrt.streaming.key_state import KeySlice
from actorrt.streaming.keys import partition

# Keys per piece of a handoff: with 5 KB of state a key, 5 MB, some tens of ms to pickle.
HANDOFF_KEYS = 1000


def hands_to(instance: int, old: int, new: int) -> list[int]:
    """The new owners old instance ``instance`` may hand keys to (itself left out)."""
    g = math.gcd(old, new)
    return [j for j in range(new) if j != instance and j % g == instance % g]


def takes_from(instance: int, old: int, new: int) -> set[int]:
    """The old instances that may hand keys to new instance ``instance``."""
    g = math.gcd(old, new)
    return {i for i in range(old) if i != instance and i % g == instance % g}


@dataclass
class Joining:
    """What an instance a rescale adds is told: the parallelism before, per port and consumer its
    channel there, its name for good (``uid``), and its own channels: the input each belongs to,
    and those whose senders retired before it came (as its stage's other instances have them)."""

    before: int
    channels: list[list[int]]
    uid: int
    inputs: list[int]
    retired: list[int]


@dataclass
class Held:
    """Records that wait for their keys' state: a batch's part, as the instance got it."""

    owner: int  # the old instance the keys come from
    upstream: int
    records: list[Any]
    times: list[int] | None
    seqs: list[int]
    now: float
    born: float


@dataclass
class Handoff:
    """Instance ``instance``'s part in a move from ``old`` to ``new`` instances."""

    instance: int
    old: int
    new: int
    awaiting: set[int] = field(default_factory=set)  # old instances whose part has not come
    handovers: int = 0  # producers that told this (old) instance they switched
    handed: bool = False  # this (old) instance gave its leaving keys away
    held: list[Held] = field(default_factory=list)
    deferred: list[tuple[int, float, bool]] = field(default_factory=list)  # (upstream, mark, idle)
    outgoing: list[tuple[int, KeySlice, bool]] = field(default_factory=list)  # pieces to hand: (to, keys, last)
    mark: float | None = None  # the watermark when the leaving keys were taken
    finishes: list[int] = field(default_factory=list)  # upstreams whose end came while records waited

    def __post_init__(self) -> None:
        if not self.awaiting and self.instance < self.new:
            self.awaiting = takes_from(self.instance, self.old, self.new)

    @property
    def old_instance(self) -> bool:
        return self.instance < self.old

    @property
    def retiring(self) -> bool:
        return self.instance >= self.new

    @property
    def done(self) -> bool:
        """Every part came, and (an old instance) its own leaving keys went."""
        return not self.awaiting and (self.handed or not self.old_instance)

    def owner_before(self, key: Any) -> int:
        return partition(key, self.old)

    def leaves(self, key: Any) -> bool:
        """Whether this instance gives ``key`` away."""
        return partition(key, self.new) != self.instance

    def split(self, records: Sequence[Any], key_of: Callable[[Any], Any], times: list[int] | None,
              seqs: Sequence[int], upstream: int, now: float, born: float) -> tuple[list[int], list[Held]]:
        """The positions of ``records`` to process now, and the parts to hold (by old owner)."""
        ready: list[int] = []
        held: dict[int, list[int]] = {}
        for p, record in enumerate(records):
            try:
                owner = self.owner_before(key_of(record))
            except Exception:  # noqa: BLE001 - a key no hash fits: the step says what happens to it
                owner = self.instance
            if owner == self.instance or owner not in self.awaiting:
                ready.append(p)
            else:
                held.setdefault(owner, []).append(p)
        parts = [Held(owner, upstream, [records[p] for p in ps], None if times is None else [times[p] for p in ps],
                      [seqs[p] for p in ps] if seqs else [], now, born) for owner, ps in held.items()]
        return ready, parts

    def arrived(self, owner: int) -> list[Held]:
        """``owner``'s part came: the records held for it, in arrival order."""
        self.awaiting.discard(owner)
        out = [h for h in self.held if h.owner == owner]
        self.held = [h for h in self.held if h.owner != owner]
        return out
