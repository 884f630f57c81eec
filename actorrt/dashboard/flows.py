"""Dataflows as graphs of stages, read from what their operators publish.

A stream operator labels itself ``"<flow>/<stage index> <stage name>#<instance>"`` and names its
input stages by the same label up to ``#`` (``__actorrt_inputs__``); its metrics carry its rates,
backlog and latencies (``operator_metrics.py``). Any actor that labels and publishes itself the
same way shows up as a stage too.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from actorrt.rpc import node_pb2

_OPERATOR = re.compile(r"^(?P<flow>[^/#]+)/(?P<stage>\d+) (?P<name>[^#]*)#(?P<instance>\d+)$")
LATENCIES = ("latency_p50_ms", "latency_p90_ms", "latency_p99_ms")


@dataclass
class Stage:
    key: str  # its label up to "#"
    index: int
    name: str
    inputs: list[str] = field(default_factory=list)
    instances: list[dict] = field(default_factory=list)  # {"instance", "slot", "actor", "metrics"}

    def total(self, metric: str) -> float:
        return sum(i["metrics"].get(metric, 0.0) for i in self.instances)

    def worst(self, metric: str) -> float | None:
        values = [i["metrics"][metric] for i in self.instances if metric in i["metrics"]]
        return max(values) if values else None

    def as_json(self) -> dict:
        return {"key": self.key, "index": self.index, "name": self.name, "inputs": self.inputs,
                "parallelism": len(self.instances), "slots": sorted({i["slot"] for i in self.instances}),
                "records_in_per_s": self.total("records_in_per_s"),
                "records_out_per_s": self.total("records_out_per_s"),
                "records_in": self.total("records_in"), "records_out": self.total("records_out"),
                "backlog_batches": self.total("backlog_batches"),
                **{m: self.worst(m) for m in LATENCIES}}


@dataclass
class Flow:
    name: str
    stages: dict[str, Stage] = field(default_factory=dict)

    def sources(self) -> list[Stage]:
        return [s for s in self.stages.values() if not s.inputs]

    def sinks(self) -> list[Stage]:
        fed = {i for s in self.stages.values() for i in s.inputs}
        return [s for s in self.stages.values() if s.key not in fed]

    def summary(self) -> dict[str, float | None]:
        """The flow as a whole: what its sources read and its sinks emit per second, what waits
        between stages, and the worst latency where records leave it."""
        sinks = self.sinks()
        out: dict[str, float | None] = {
            "records_in_per_s": sum(s.total("records_in_per_s") for s in self.sources()),
            "records_out_per_s": sum(s.total("records_out_per_s") for s in sinks),
            "backlog_batches": sum(s.total("backlog_batches") for s in self.stages.values())}
        for metric in LATENCIES:
            values = [v for s in self.stages.values() if (v := s.worst(metric)) is not None]
            out[metric] = max(values) if values else None
        return out

    def slots(self) -> set[int]:
        return {i["slot"] for s in self.stages.values() for i in s.instances}

    def as_json(self) -> dict:
        stages = sorted(self.stages.values(), key=lambda s: s.index)
        return {"name": self.name, "stages": [s.as_json() for s in stages], **self.summary()}


def flows_of(nodes: list[node_pb2.NodeStatsReply]) -> dict[str, Flow]:
    """The flows whose operators the nodes host, by name."""
    flows: dict[str, Flow] = {}
    for node in nodes:
        for actor in node.actors:
            match = _OPERATOR.match(actor.label)
            if match is None:
                continue
            flow = flows.setdefault(match["flow"], Flow(match["flow"]))
            key = actor.label.rpartition("#")[0]
            stage = flow.stages.get(key)
            if stage is None:
                stage = flow.stages[key] = Stage(key, int(match["stage"]), match["name"], list(actor.inputs))
            stage.instances.append({"instance": int(match["instance"]), "slot": node.slot,
                                    "actor": actor.actor_id.hex(), "metrics": finite_metrics(actor)})
    return dict(sorted(flows.items()))


def finite_metrics(actor: node_pb2.ActorStats) -> dict[str, float]:
    """What an actor publishes, less what is not a number (NaN, infinities: JSON has no word
    for them, and a page that cannot parse one update would stop updating)."""
    return {name: value for name, value in actor.metrics.items() if math.isfinite(value)}
