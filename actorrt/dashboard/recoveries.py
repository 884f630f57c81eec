"""Failures the head saw, each joined with the recovery its replacement reports.

The head records a failure when it declares a node dead (``failed``), and the nodes a rollback
round sends back with it (``rolled_back``). The node that rebuilds a failed slot's actors reports
its phases (``RecoveryStats``) in its heartbeats until its replay is done; ``observe`` attaches
them to the failure they recover from.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

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
    # What the nodes that rebuilt its actors report, by (node slot, node epoch, index): the slot's
    # next incarnation, an heir, or a node whose standbys took its actors' place (several may).
    reports: dict[tuple[int, int, int], dict] = field(default_factory=dict)
    flows: list[str] | None = None  # the flows with an operator on the slot (set at the next sample)

    @property
    def recovery(self) -> dict | None:
        """The report of the slot's own next incarnation if there is one, else of whichever
        node rebuilt its actors."""
        own = [r for (slot, _, _), r in self.reports.items() if slot == self.slot]
        return next(iter(own or self.reports.values()), None)

    @property
    def done(self) -> bool:
        recovery = self.recovery
        return recovery is not None and recovery.get("replay_ms", 0.0) > 0.0

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
        phases = self.phases()
        return {"id": self.id, "slot": self.slot, "epoch": self.epoch, "reason": self.reason, "at": self.at,
                "with_slot": self.with_slot, "done": self.done, "flows": self.flows or [],
                "phases": [{"name": n, "ms": ms} for n, ms in phases], "total_ms": sum(ms for _, ms in phases),
                "actors": r.get("actors", 0), "tasks_replayed": r.get("tasks_replayed", 0),
                "replay_tasks_per_s": r.get("replay_tasks_per_s", 0.0),
                "from_checkpoint": r.get("from_checkpoint", 0),
                "from_standby": sum(other.get("from_standby", 0) for other in self.reports.values()),
                "sends_skipped": r.get("sends_skipped", 0),
                "promoted": any(other.get("promoted", False) for other in self.reports.values())}


class FailureLog:
    def __init__(self, kept: int = FAILURES_KEPT) -> None:
        self.failures: deque[Failure] = deque(maxlen=kept)
        self._next = 1
        # Every report the live incarnations carry, by (node slot, node epoch, index in its
        # recoveries): the failure it is of, or None for one of a failure this log never saw (from
        # before the head restarted), which no later failure may take.
        self._reports: dict[tuple[int, int, int], Failure | None] = {}

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
        """Attach the recoveries the nodes report (each in every heartbeat of its incarnation) to
        the failures they recover from, the first time each is seen; update each until done."""
        seen: dict[tuple[int, int, int], Failure | None] = {}
        for node in nodes:
            for i, recovery in enumerate(node.recoveries):
                key = (node.slot, node.epoch, i)
                failure = self._reports[key] if key in self._reports else self._match(recovery, node.slot, node.epoch)
                seen[key] = failure
                if failure is not None and failure.reports.get(key, {}).get("replay_ms", 0.0) <= 0.0:
                    failure.reports[key] = MessageToDict(recovery, preserving_proto_field_name=True,
                                                         always_print_fields_with_no_presence=True)
        self._reports = seen  # incarnations gone report no more

    def _match(self, recovery: node_pb2.RecoveryStats, slot: int, epoch: int) -> Failure | None:
        """The latest failure of a slot this recovery rebuilt: its own slot's earlier
        incarnation, or a dead slot it inherited or took standbys over from."""
        rebuilt = set(recovery.slots) or {slot}
        for f in reversed(self.failures):
            if f.slot in rebuilt and (f.slot != slot or f.epoch < epoch):
                return f
        return None

    def recent(self, count: int) -> list[Failure]:
        return list(self.failures)[-count:][::-1]
