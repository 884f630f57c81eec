"""Event-time progress of one operator instance: watermarks as Flink's flow.

A source instance makes its watermark from the records it reads (``SourceProgress``): the newest
time read, less the flow's ``max_delay_s``. Every other instance keeps the latest watermark of
each input channel and has the minimum over the channels that are not idle (``InputProgress``).
Watermarks reach every downstream instance, records or not, so an instance that owns no key still
moves on. Both are plain state in the operator, checkpointed with it and rebuilt by its replay.

A watermark ``w`` (integer µs) says that no record with a time before ``w`` is to come; a window
ending at or before it is complete. Minus infinity: nothing is known yet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from actorrt.streaming.plan import EventTime, to_us

UNKNOWN = -math.inf
DONE = math.inf


@dataclass
class SourceProgress:
    """A source instance's watermark, from the records it reads.

    Idleness is judged from the clock readings of the instance's timer alone: it is idle once no
    batch came between ticks for ``idle_s``. A batch waiting in its mailbox is taken before the
    next tick (a mailbox is first in, first out), so an instance that is behind is not idle."""

    time: EventTime
    newest: float = UNKNOWN  # the newest record time read (µs)
    mark: float = UNKNOWN
    idle: bool = False
    read_since_tick: bool = False
    last_busy: float | None = None  # the clock at the last tick that followed a batch (s)

    def read(self, times: list[int]) -> None:
        """A batch with these record times was read."""
        self.read_since_tick = True
        self.idle = False
        if times:
            self.newest = max(self.newest, max(times))
            self.mark = max(self.mark, self.newest - to_us(self.time.max_delay_s))

    def check_idle(self, now: float) -> None:
        """A tick at ``now``. With ``idle_s``: idle once no batch came for that long, and then the
        watermark moves on with the clock from the newest time read (windows close on a quiet
        input)."""
        if self.time.idle_s is None:
            return
        if self.read_since_tick or self.last_busy is None:
            self.read_since_tick, self.last_busy = False, now  # busy (or the first tick: from the start)
            return
        quiet = now - self.last_busy - self.time.idle_s
        if quiet < 0:
            return
        self.idle = True
        if math.isfinite(self.newest):
            self.mark = max(self.mark, self.newest - to_us(self.time.max_delay_s) + to_us(quiet))

    def finish(self) -> None:
        self.mark, self.idle = DONE, False


@dataclass
class InputProgress:
    """The watermark of an instance with ``inputs`` upstream instances: the minimum of their
    watermarks, leaving out idle inputs and finished ones (if only idle ones are left: their
    maximum, Flink's flush). It never goes back: an input that wakes up behind it sends records
    that may be late."""

    inputs: int
    marks: list[float] = field(default_factory=list)
    idle_inputs: list[bool] = field(default_factory=list)
    mark: float = UNKNOWN
    idle: bool = False

    def __post_init__(self) -> None:
        self.marks = self.marks or [UNKNOWN] * self.inputs
        self.idle_inputs = self.idle_inputs or [False] * self.inputs

    def update(self, upstream: int, mark: float, idle: bool = False) -> None:
        """Input ``upstream`` is at ``mark`` (idle or not)."""
        self.marks[upstream] = max(self.marks[upstream], mark)
        self.idle_inputs[upstream] = idle
        pairs = list(zip(self.marks, self.idle_inputs, strict=True))
        holding = [m for m, quiet in pairs if not quiet and m != DONE]
        quiet = [m for m, q in pairs if q and m != DONE]
        if holding:
            mark = min(holding)
        else:  # only idle inputs left (Flink's flush: their maximum), or none at all
            mark = max(quiet) if quiet else DONE
        self.mark = max(self.mark, mark)
        self.idle = not holding and bool(quiet)

    def finish(self, upstream: int) -> None:
        """Input ``upstream`` sends nothing more."""
        self.update(upstream, DONE)
