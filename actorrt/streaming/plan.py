"""The logical dataflow: what a user builds with ``Dataflow`` and ``Stream``, before it runs.

A dataflow is a chain of *stages*. A stage is what one set of operator actors runs: the stateless
steps (``map``, ``flat_map``, ``filter``) fused after whatever starts the stage, so a record
crosses processes only where it must change hands: at a ``key_by`` (a shuffle by key, then a
keyed step) and at a change of parallelism. Plans are plain data, cloudpickled into the operators.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

OnError = Literal["fail", "dead_letter"]


@dataclass(frozen=True)
class Tumbling:
    """Processing-time windows of ``size_s`` seconds, aligned to the epoch: [k·size, (k+1)·size)."""

    size_s: float

    def __post_init__(self) -> None:
        if not self.size_s > 0:
            raise ValueError(f"a window needs a size > 0 s, not {self.size_s!r}")

    def windows_of(self, t: float) -> list[float]:
        """The starts of the windows a record arriving at ``t`` belongs to."""
        return [t - t % self.size_s]

    def end(self, start: float) -> float:
        return start + self.size_s


@dataclass(frozen=True)
class Sliding:
    """Processing-time windows of ``size_s`` seconds every ``every_s`` (each record in size/every)."""

    size_s: float
    every_s: float

    def __post_init__(self) -> None:
        if not (self.size_s > 0 and self.every_s > 0):
            raise ValueError(f"a sliding window needs size and slide > 0 s, not {self.size_s!r}, {self.every_s!r}")

    def windows_of(self, t: float) -> list[float]:
        last = t - t % self.every_s
        starts = []
        start = last
        while start > t - self.size_s:
            starts.append(start)
            start -= self.every_s
        return sorted(starts)

    def end(self, start: float) -> float:
        return start + self.size_s


Window = Tumbling | Sliding


@dataclass(frozen=True)
class Step:
    """One operation on records: stateless (``map``, ``flat_map``, ``filter``), or keyed and
    stateful (``fold``: per key; ``window``: per key and window), then first in its stage."""

    kind: Literal["map", "flat_map", "filter", "fold", "window"]
    name: str
    fn: Callable[..., Any]
    init: Callable[[], Any] | None = None  # the empty state of a keyed step
    window: Window | None = None
    on_error: OnError = "fail"


@dataclass
class Stage:
    parallelism: int
    key: Callable[[Any], Any] | None = None  # records enter by this key (hash-partitioned), else round robin
    steps: list[Step] = field(default_factory=list)

    @property
    def name(self) -> str:
        return "->".join(s.name for s in self.steps) or "source"


@dataclass
class Plan:
    name: str
    source: Iterable[Any] | None = None
    batch_size: int = 100
    stages: list[Stage] = field(default_factory=list)
    max_in_flight: int = 8  # batches a producer may have unprocessed at each consumer


def check_parallelism(parallelism: int) -> int:
    if not isinstance(parallelism, int) or parallelism < 1:
        raise ValueError(f"parallelism must be an int >= 1, not {parallelism!r}")
    return parallelism


def check_on_error(on_error: str) -> OnError:
    if on_error not in ("fail", "dead_letter"):
        raise ValueError(f"on_error must be 'fail' or 'dead_letter', not {on_error!r}")
    return on_error  # type: ignore[return-value]


def step_name(kind: str, fn: Callable[..., Any], name: str | None) -> str:
    return name or f"{kind}({getattr(fn, '__qualname__', type(fn).__name__)})"
