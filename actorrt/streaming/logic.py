"""What one operator instance does to a batch of records: pure logic, no actors, no sockets.

Keyed state lives in plain dicts, iterated in insertion order, so a replay that feeds the same
batches at the same recorded times rebuilds it exactly. Time is an argument: the operator actor
passes recorded readings (``actorrt.now()``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from actorrt.exceptions import ActorRTError
from actorrt.streaming.plan import Stage, Step


class RecordError(ActorRTError):
    """An operator raised on a record (with ``on_error="fail"``, the default): the run stops."""


@dataclass
class DeadLetter:
    """A record an operator with ``on_error="dead_letter"`` could not take, and why."""

    operator: str
    record: Any
    error: str


@dataclass
class StageLogic:
    stage: Stage
    folds: dict[Any, Any] = field(default_factory=dict)  # key -> state (a fold step)
    windows: dict[tuple[float, Any], Any] = field(default_factory=dict)  # (window start, key) -> state
    dead_letters: list[DeadLetter] = field(default_factory=list)

    @property
    def keyed(self) -> Step | None:
        first = self.stage.steps[0] if self.stage.steps else None
        return first if first is not None and first.kind in ("fold", "window") else None

    def process(self, batch: list[Any], now: float) -> list[Any]:
        """The records ``batch`` (arrived at ``now``) makes this stage emit."""
        keyed = self.keyed
        if keyed is None:
            return self._stateless(batch, 0)
        if keyed.kind == "fold":
            return self._stateless(self._fold(keyed, batch), 1)
        self._into_windows(keyed, batch, now)
        return []

    def close(self, now: float) -> list[Any]:
        """Windows that ended by ``now``, emitted as ``(key, start, end, state)`` in start order."""
        keyed = self.keyed
        if keyed is None or keyed.kind != "window":
            return []
        done = [k for k in self.windows if keyed.window.end(k[0]) <= now]
        return self._stateless([self._emit_window(keyed, k) for k in sorted(done, key=_order)], 1)

    def finish(self) -> list[Any]:
        """The end of the input: every open window closes."""
        keyed = self.keyed
        if keyed is None or keyed.kind != "window":
            return []
        return self._stateless([self._emit_window(keyed, k) for k in sorted(self.windows, key=_order)], 1)

    def _emit_window(self, step: Step, k: tuple[float, Any]) -> tuple[Any, float, float, Any]:
        start, key = k
        return key, start, step.window.end(start), self.windows.pop(k)

    def _fold(self, step: Step, batch: list[Any]) -> list[tuple[Any, Any]]:
        changed: dict[Any, None] = {}
        for record in batch:
            key = self.stage.key(record)
            state = self.folds[key] if key in self.folds else step.init()
            ok, state = self._apply(step, step.fn, state, record)
            if ok:
                self.folds[key] = state
                changed[key] = None
        return [(key, self.folds[key]) for key in changed]

    def _into_windows(self, step: Step, batch: list[Any], now: float) -> None:
        for record in batch:
            key = self.stage.key(record)
            for start in step.window.windows_of(now):
                k = (start, key)
                state = self.windows[k] if k in self.windows else step.init()
                ok, state = self._apply(step, step.fn, state, record)
                if ok:
                    self.windows[k] = state

    def _stateless(self, records: list[Any], first: int) -> list[Any]:
        for step in self.stage.steps[first:]:
            out: list[Any] = []
            for record in records:
                ok, value = self._apply(step, step.fn, record)
                if not ok:
                    continue
                if step.kind == "map":
                    out.append(value)
                elif step.kind == "flat_map":
                    out.extend(value)
                elif value:
                    out.append(record)
            records = out
        return records

    def _apply(self, step: Step, fn: Any, *args: Any) -> tuple[bool, Any]:
        record = args[-1]
        try:
            return True, fn(*args)
        except Exception as exc:  # noqa: BLE001 - a user function: its policy says what happens
            if step.on_error == "dead_letter":
                self.dead_letters.append(DeadLetter(step.name, record, f"{type(exc).__name__}: {exc}"))
                return False, None
            raise RecordError(f"operator {step.name} raised {type(exc).__name__} on record {record!r}: {exc}") from exc


def _order(k: tuple[float, Any]) -> tuple[float, str]:
    return k[0], repr(k[1])
