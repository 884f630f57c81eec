"""What the head has seen of its cluster over the last minutes: one sample a second.

The dashboard's charts read it: each flow's rates, backlog and latencies, each node's CPU and
memory, and each process's lineage (its stash, its flushes' latency and bytes per task). Actor
restarts are counted here too: an actor seen on another node incarnation than before was rebuilt
(on its node's next one, an heir, or where its standby was). What has not been seen for the
window's length is forgotten.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from actorrt.dashboard.flows import Flow, flows_of
from actorrt.dashboard.recoveries import FailureLog
from actorrt.rpc import head_pb2, node_pb2

SAMPLE_EVERY_S = 1.0
WINDOW_S = 600.0  # kept: ten minutes of samples
# A failure touched the flows that had an operator on its node this recently.
TOUCHED_WITHIN_S = 30.0


@dataclass
class Series:
    """Points (time, value per name) over the window; names may come and go."""

    window_s: float = WINDOW_S
    points: deque[tuple[float, dict[str, float | None]]] = field(default_factory=deque)

    def add(self, at: float, values: dict[str, float | None]) -> None:
        self.points.append((at, values))
        while self.points and at - self.points[0][0] > self.window_s:
            self.points.popleft()

    def columns(self, since: float = 0.0, until: float = float("inf")) -> dict[str, list]:
        """``{"t": [...], name: [...]}`` over ``[since, until]``, None where a name had no value
        (uPlot's column layout: a gap in the line)."""
        chosen = [(t, v) for t, v in self.points if since <= t <= until]
        names = sorted({name for _, v in chosen for name in v})
        return {"t": [t for t, _ in chosen], **{n: [v.get(n) for _, v in chosen] for n in names}}


class History:
    def __init__(self, failures: FailureLog, window_s: float = WINDOW_S) -> None:
        self.failures = failures
        self.window_s = window_s
        self.flows: dict[str, Series] = {}  # by flow: its summary (Flow.summary)
        self.nodes = Series(window_s)  # "cpu <slot>", "rss <slot>" (MiB)
        self.lineage = Series(window_s)  # "stash <key>", "latency <key>" (ms), "bytes/task <key>" (LineageProcess.key)
        self.last_flows: dict[str, Flow] = {}
        self._flow_slots: dict[tuple[str, int], float] = {}  # (flow, slot): when an operator was last seen there
        self.restarts: dict[bytes, int] = {}  # actor: times seen on another node incarnation than before
        self._seen_on: dict[bytes, tuple[int, int, float]] = {}  # actor: (slot, epoch, when) last seen

    def sample(self, at: float, stats: head_pb2.ClusterStatsReply) -> None:
        """Take one sample: ``at`` is wall-clock seconds, ``stats`` the head's newest heartbeats."""
        nodes = list(stats.nodes)
        self.failures.observe(nodes)
        self.last_flows = flows_of(nodes)
        for name, flow in self.last_flows.items():
            self.flows.setdefault(name, Series(self.window_s)).add(at, flow.summary())
            self._flow_slots.update({(name, slot): at for slot in flow.slots()})
        for failure in self.failures.failures:
            if failure.flows is None:
                failure.flows = sorted({name for (name, slot), seen in self._flow_slots.items()
                                        if slot == failure.slot and failure.at - seen < TOUCHED_WITHIN_S})
        self.nodes.add(at, {k: v for n in nodes for k, v in (
            (f"cpu {n.slot}", n.cpu_percent), (f"rss {n.slot}", n.rss_bytes / 2**20))})
        lineage: dict[str, float | None] = {}
        for p in lineage_processes(stats):
            lineage[f"stash {p.key}"] = p.stats.stash_size
            lineage[f"latency {p.key}"] = p.stats.store_latency_ms_p50
            lineage[f"bytes/task {p.key}"] = bytes_per_task(p.stats)
        self.lineage.add(at, lineage)
        for n in nodes:
            for actor in n.actors:
                seen = self._seen_on.get(actor.actor_id)
                if seen is not None and seen[:2] != (n.slot, n.epoch):
                    self.restarts[actor.actor_id] = self.restarts.get(actor.actor_id, 0) + 1
                self._seen_on[actor.actor_id] = (n.slot, n.epoch, at)
        self._forget(at - self.window_s)

    def _forget(self, before: float) -> None:
        """Drop flows, placements and actors not seen since ``before``."""
        self.flows = {name: s for name, s in self.flows.items() if s.points and s.points[-1][0] >= before}
        self._flow_slots = {k: seen for k, seen in self._flow_slots.items() if seen >= before}
        gone = [a for a, (_, _, seen) in self._seen_on.items() if seen < before]
        for actor in gone:
            del self._seen_on[actor]
            self.restarts.pop(actor, None)

    def flow_columns(self, name: str, since: float = 0.0, until: float = float("inf")) -> dict[str, list]:
        series = self.flows.get(name)
        return series.columns(since, until) if series is not None else {"t": []}


@dataclass(frozen=True)
class LineageProcess:
    key: str  # in the series' names: a node's slot, or "driver <address>"
    slot: int | None  # None: a driver
    epoch: int | None
    stats: node_pb2.LineageStats


def lineage_processes(stats: head_pb2.ClusterStatsReply) -> list[LineageProcess]:
    """The processes whose lineage stash the head hears of: its live nodes, then its drivers."""
    return ([LineageProcess(str(n.slot), n.slot, n.epoch, n.lineage) for n in stats.nodes if n.HasField("lineage")]
            + [LineageProcess(f"driver {d.address}", None, None, d.lineage) for d in stats.drivers])


def bytes_per_task(lineage: node_pb2.LineageStats) -> float | None:
    """Lineage bytes a process wrote to the store per spec version it flushed."""
    return lineage.store_bytes_written / lineage.flushed if lineage.flushed else None
