"""Where an operator instance's output goes: pure logic, no actors, no sockets.

Records go to the instances of each stage that takes them by key (``keys.partition``), or in
turn. In event time every instance of such a stage also hears this instance's watermark, whether or not records
go its way: with a batch of records, or in a message of its own when it crosses a point where a
window downstream closes (or the instance becomes idle or busy). So an instance that owns no key
still moves on, at the cost of a message per window per consumer, not one per batch (a session
may end anywhere: ahead of session windows, every move of the watermark is passed on).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from actorrt.streaming.keys import partition
from actorrt.streaming.logic import DeadLetter, Out, RecordError
from actorrt.streaming.plan import Consumer, Plan, Step
from actorrt.streaming.progress import DONE, UNKNOWN


@dataclass
class Batch:
    """Records (and their times) for consumer ``to``, with the sender's watermark after them and
    whether the sender is idle (None, False in processing time)."""

    to: int
    records: list[Any]
    times: list[int] | None
    mark: float | None
    idle: bool = False
    seqs: list[int] | None = None  # the records' IDs (capturing record lineage)


@dataclass
class Advance:
    """The sender's watermark (and idleness) for consumer ``to``, which gets no records now."""

    to: int
    mark: float
    idle: bool


@dataclass
class Fanout:
    """An instance's consumers on one of its ports: the ``consumers`` instances of a stage that
    takes records by ``key`` (None: in turn) into its ``keyed`` step; ``grid``: where windows after
    this instance close, as (period, offset) in µs of its watermark (``Plan.window_grid``)."""

    key: Callable[[Any], Any] | None
    keyed: Step | None
    consumers: int
    grid: list[tuple[int, int]]
    turn: int = 0  # round robin, where the consumer is not keyed
    told: list[tuple[float, bool]] = field(default_factory=list)  # what each consumer last heard

    def __post_init__(self) -> None:
        self.told = self.told or [(UNKNOWN, False)] * self.consumers

    def messages(self, out: Out, watermark: tuple[float, bool] | None, dead_letters: list[DeadLetter],
                 seqs: Sequence[int] | None = None) -> list[Batch | Advance]:
        """What to send for ``out``, given this instance's ``watermark`` after it (None in
        processing time); a record whose key cannot be taken goes to ``dead_letters`` if the
        keyed step says so; ``seqs``: the records' IDs, which go with them."""
        sent: list[Batch | Advance] = []
        mark, idle = (None, False) if watermark is None else watermark
        for i, (records, times, ids) in enumerate(self._split(out, dead_letters, seqs)):
            if records:
                sent.append(Batch(i, records, times, mark, idle, ids))
                if watermark is not None:
                    self.told[i] = watermark
            elif watermark is not None and self._worth_telling(i, watermark):
                sent.append(Advance(i, *watermark))
                self.told[i] = watermark
        return sent

    def _split(self, out: Out, dead_letters: list[DeadLetter], seqs: Sequence[int] | None) -> list[Out]:
        """Per consumer: its records, their times and their IDs (in ``Out.origins``' place)."""
        records, times = out.records, out.times
        parts = [Out([], None if times is None else [], None if seqs is None else []) for _ in range(self.consumers)]
        key, keyed = self.key, self.keyed
        for j, record in enumerate(records):
            if key is None:
                i = self.turn % self.consumers
                self.turn += 1
            else:
                try:
                    i = partition(key(record), self.consumers)
                except Exception as exc:  # noqa: BLE001 - the user's key function, or a key no hash fits
                    if keyed is None or keyed.on_error != "dead_letter":
                        raise RecordError(f"operator {keyed.name if keyed else 'key_by'}: the key of record "
                                          f"{record!r}: {type(exc).__name__}: {exc}") from exc
                    dead_letters.append(DeadLetter(keyed.name, record, f"{type(exc).__name__}: {exc}"))
                    continue
            parts[i].records.append(record)
            if times is not None:
                parts[i].times.append(times[j])
            if seqs is not None:
                parts[i].origins.append(seqs[j])
        return parts

    def _worth_telling(self, i: int, watermark: tuple[float, bool]) -> bool:
        """Whether consumer ``i``, which gets no records now, must hear of ``watermark``: it
        became idle or busy, or it crossed a point where a window after this stage closes."""
        (told, told_idle), (mark, idle) = self.told[i], watermark
        if idle != told_idle:
            return True
        if mark <= told or not self.grid:
            return False
        if told == UNKNOWN or mark == DONE:
            return True
        return any((mark - offset) // period > (told - offset) // period for period, offset in self.grid)


def fanout_to(plan: Plan, stage: int, consumer: Consumer) -> Fanout:
    """The fanout of an instance of ``stage`` to the stage ``consumer`` names."""
    into = plan.stages[consumer.stage]
    return Fanout(consumer.input.key, into.keyed, into.parallelism, plan.window_grid(stage))
