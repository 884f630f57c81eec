"""Event-time dataflows drawn at random, and a plain-Python oracle of what each must give: for the
property-based tests (in one process, and on a real cluster with a node killed) and for
``scripts/streaming_properties.py``, which runs them long."""

from __future__ import annotations

import collections
import os
import random
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from actorrt.streaming import Dataflow, EventTime, Session, Sliding, Tumbling
from actorrt.streaming.testing import KillNodeAt

# ``scripts/streaming_properties.py`` sets it: that many examples, drawn afresh (not CI's fixed few).
EXAMPLES_ENV = "ACTORRT_PROPERTY_EXAMPLES"


def property_settings(ci_examples: int) -> settings:
    """Hypothesis settings for a property of whole flows: in CI a fixed sample of ``ci_examples``
    (the same every run); with ``ACTORRT_PROPERTY_EXAMPLES`` set, that many new ones."""
    examples = os.environ.get(EXAMPLES_ENV)
    return settings(max_examples=int(examples) if examples else ci_examples, derandomize=not examples,
                    deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
                    print_blob=True)


@dataclass(frozen=True)
class FlowCase:
    """One flow: source instances, an optional middle stage, a keyed window; input whose times are
    out of order by at most ``disorder_ms``, within ``max_delay_ms``: nothing may come out late."""

    seed: int
    records: int
    keys: int
    disorder_ms: int
    max_delay_ms: int
    batch_size: int
    source_parallelism: int
    middle_parallelism: int  # 0: no middle stage
    window: str  # "tumbling", "sliding" or "session"
    size_ms: int  # the size, or the session's gap
    slide_ms: int
    window_parallelism: int
    kill_at: int | None = None  # a record of the middle stage (or the source's) at which its node dies

    def events(self) -> list[tuple[str, float, int]]:
        """(key, event time in s, value): 1,000 records a second of event time, on a ms grid."""
        rng = random.Random(self.seed)
        return [(f"k{rng.randrange(self.keys)}", max(0, i - rng.randrange(self.disorder_ms + 1)) / 1000,
                 rng.randrange(100)) for i in range(self.records)]

    def window_spec(self) -> Tumbling | Sliding | Session:
        if self.window == "tumbling":
            return Tumbling(self.size_ms / 1000)
        if self.window == "sliding":
            return Sliding(self.size_ms / 1000, self.slide_ms / 1000)
        return Session(self.size_ms / 1000)

    def build(self, source: Any, name: str = "case", marker: str | None = None) -> Dataflow:
        """The flow on ``source`` (an iterable, or ``Fed()``); ``marker``: the file ``KillNodeAt``
        keeps, if the case kills a node."""
        flow = Dataflow(name, batch_size=self.batch_size, max_in_flight=4)
        stream = flow.source(source, parallelism=self.source_parallelism,
                             time=EventTime(_time, max_delay_s=self.max_delay_ms / 1000))
        if self.middle_parallelism:
            stream = stream.map(_same, parallelism=self.middle_parallelism)
        if self.kill_at is not None:
            stream = stream.map(KillNodeAt(self.kill_at, marker))
        (stream.key_by(_key)
         .window(self.window_spec(), int, _add, merge=_merge if self.window == "session" else None,
                 parallelism=self.window_parallelism)
         .collect())
        return flow

    def oracle(self, events: list[tuple[str, float, int]]) -> list[tuple[str, float, float, int]]:
        """Every window, ``(key, start, end, total)``, sorted: computed in whole milliseconds."""
        out: collections.Counter = collections.Counter()
        if self.window == "session":
            sessions = []
            for key in sorted({k for k, _, _ in events}):
                mine = sorted((round(t * 1000), v) for k, t, v in events if k == key)
                start, last, total = mine[0][0], mine[0][0], 0
                for t, v in mine:
                    if t - last >= self.size_ms:
                        sessions.append((key, start / 1000, (last + self.size_ms) / 1000, total))
                        start, total = t, 0
                    last, total = t, total + v
                sessions.append((key, start / 1000, (last + self.size_ms) / 1000, total))
            return sorted(sessions)
        slide = self.size_ms if self.window == "tumbling" else self.slide_ms
        for key, t, value in events:
            t_ms = round(t * 1000)
            k = t_ms // slide
            while k * slide > t_ms - self.size_ms:
                out[(key, k * slide)] += value
                k -= 1
        return sorted((key, start / 1000, (start + self.size_ms) / 1000, total) for (key, start), total in out.items())


def _time(event: tuple[str, float, int]) -> float:
    return event[1]


def _same(event: Any) -> Any:
    return event


def _key(event: tuple[str, float, int]) -> str:
    return event[0]


def _add(total: int, event: tuple[str, float, int]) -> int:
    return total + event[2]


def _merge(a: int, b: int) -> int:
    return a + b


@st.composite
def flow_cases(draw: Any, records: tuple[int, int] = (200, 3000), kill: bool = False) -> FlowCase:
    max_delay = draw(st.integers(0, 2000))
    window = draw(st.sampled_from(["tumbling", "sliding", "session"]))
    size = draw(st.integers(50, 2000))
    n = draw(st.integers(*records))
    return FlowCase(
        seed=draw(st.integers(0, 2**32)), records=n, keys=draw(st.integers(1, 6)),
        disorder_ms=draw(st.integers(0, max_delay)), max_delay_ms=max_delay, batch_size=draw(st.integers(1, 64)),
        source_parallelism=draw(st.integers(1, 3)), middle_parallelism=draw(st.integers(0, 3)), window=window,
        size_ms=size, slide_ms=draw(st.integers(max(1, size // 5), size)) if window == "sliding" else 0,
        window_parallelism=draw(st.integers(1, 3)),
        kill_at=draw(st.integers(1, max(1, n // 4))) if kill else None)  # every instance sees more than n/4


def windows_of(outputs: list[Any]) -> list[tuple[str, float, float, int]]:
    return sorted(tuple(w) for w in outputs)
