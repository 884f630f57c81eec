"""Failures the head saw, each joined with the recovery its replacement reports.

The head records a failure when it declares a node dead (``failed``), and the nodes a rollback
round sends back with it (``rolled_back``). The node that rebuilds a failed slot's actors reports
its phases (``RecoveryStats``) in its heartbeats until its replay is done; ``observe`` attaches
them to the failure they recover from.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from google.protobuf.json_format import MessageToDict

from actorrt.rpc import node_pb2

# Failures kept (the oldest are dropped): enough for a chaos run's recent past.
FAILURES_KEPT = 200


@dataclass
class Failure:
    id: int
    slot: int
    epoch: int  # the incarnation that died (or went back)
    reason: str
    at: float  # wall-clock time it died: its kill, else its last heartbeat
    detection_ms: float  # from then until the head declared it dead
    with_slot: int | None = None  # a node sent back by a rollback round with this failed one
    round_ms: float = 0.0  # the rollback round that decided who goes back (ft="checkpoint")
    recovery: dict | None = None  # its replacement's RecoveryStats, as they arrive
    flows: list[str] | None = None  # the flows with an operator on the slot (set at the next sample)

    @property
    def done(self) -> bool:
        return self.recovery is not None and self.recovery.get("replay_ms", 0.0) > 0.0

    def phases(self) -> list[tuple[str, float]]:
        """The recovery phase by phase, in order: (name, milliseconds)."""
        r = self.recovery or {}
        detection = self.detection_ms if self.with_slot is None else 0.0
        out = [("detection", detection), ("rollback round", self.round_ms),
               ("restart", r.get("restart_ms", 0.0)), ("survivors' flush", r.get("flush_ms", 0.0)),
               ("reading lineage", r.get("fetch_ms", 0.0)), ("replay", r.get("replay_ms", 0.0))]
        return [(name, ms) for name, ms in out if ms > 0.0 or name in ("detection", "restart", "replay")]

    def as_json(self) -> dict:
        r = self.recovery or {}
        return {"id": self.id, "slot": self.slot, "epoch": self.epoch, "reason": self.reason, "at": self.at,
                "with_slot": self.with_slot, "done": self.done, "flows": self.flows or [],
                "phases": [{"name": n, "ms": ms} for n, ms in self.phases()],
                "total_ms": sum(ms for _, ms in self.phases()),
                "actors": r.get("actors", 0), "tasks_replayed": r.get("tasks_replayed", 0),
                "replay_tasks_per_s": r.get("replay_tasks_per_s", 0.0),
                "from_checkpoint": r.get("from_checkpoint", 0), "from_standby": r.get("from_standby", 0),
                "sends_skipped": r.get("sends_skipped", 0), "promoted": r.get("promoted", False)}


class FailureLog:
    def __init__(self, kept: int = FAILURES_KEPT) -> None:
        self.failures: deque[Failure] = deque(maxlen=kept)
        self._next = 1
        # (node slot, node epoch, index in its recoveries) -> the failure that recovery is of
        self._reports: dict[tuple[int, int, int], Failure] = {}

    def failed(self, slot: int, epoch: int, reason: str, at: float, detection_ms: float) -> Failure:
        failure = Failure(self._next, slot, epoch, reason, at, detection_ms)
        self._next += 1
        self.failures.append(failure)
        return failure

    def rolled_back(self, failed_slot: int, back: dict[int, int], at: float, round_ms: float) -> None:
        """A rollback round for ``failed_slot``'s failure took ``round_ms`` and sends the nodes
        ``back`` (slot: epoch) to the last global checkpoint with it."""
        for f in reversed(self.failures):
            if f.slot == failed_slot and f.with_slot is None:
                f.round_ms = round_ms
                break
        for slot, epoch in sorted(back.items()):
            if slot != failed_slot:
                went = self.failed(slot, epoch, f"rolled back with node {failed_slot}", at, 0.0)
                went.with_slot, went.round_ms = failed_slot, round_ms

    def observe(self, nodes: list[node_pb2.NodeStatsReply]) -> None:
        """Attach the recoveries the nodes report to the failures they recover from."""
        for node in nodes:
            for i, recovery in enumerate(node.recoveries):
                key = (node.slot, node.epoch, i)
                failure = self._reports.get(key)
                if failure is None:
                    failure = self._match(recovery, node.slot, node.epoch)
                    if failure is None:
                        continue
                    self._reports[key] = failure
                    self._forget_dropped()
                if not failure.done:
                    failure.recovery = MessageToDict(recovery, preserving_proto_field_name=True,
                                                     always_print_fields_with_no_presence=True)

    def _match(self, recovery: node_pb2.RecoveryStats, slot: int, epoch: int) -> Failure | None:
        """The latest failure without a recovery of a slot this one rebuilt: its own slot's
        earlier incarnation, or a dead slot it inherited or took standbys over from."""
        rebuilt = set(recovery.slots) or {slot}
        taken = set(map(id, self._reports.values()))
        for f in reversed(self.failures):
            if f.slot in rebuilt and id(f) not in taken and (f.slot != slot or f.epoch < epoch):
                return f
        return None

    def _forget_dropped(self) -> None:
        if len(self._reports) > 2 * (self.failures.maxlen or 0):
            kept = set(map(id, self.failures))
            self._reports = {k: f for k, f in self._reports.items() if id(f) in kept}

    def recent(self, count: int) -> list[Failure]:
        return list(self.failures)[-count:][::-1]
