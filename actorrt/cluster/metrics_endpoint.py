"""The head's Prometheus endpoint: the cluster's nodes and actors as metrics, read at each scrape.

Nodes send their stats with every heartbeat; a scrape reads the newest the head has, so it costs
the cluster nothing. Per actor: its queue, tasks run, results kept, and what its instance
publishes (``__actorrt_metrics__``: a stream operator's rates, backlog and latency percentiles),
labelled with the actor's name (``options(name=...)``), label (``__actorrt_label__``), class and ID.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from actorrt.lineage import ids
from actorrt.rpc import head_pb2

_NOT_A_NAME = re.compile(r"[^a-zA-Z0-9_]")


class ClusterCollector:
    def __init__(self, cluster_stats: Callable[[], head_pb2.ClusterStatsReply]) -> None:
        self._cluster_stats = cluster_stats

    def collect(self) -> Iterator[Metric]:
        reply = self._cluster_stats()
        alive = GaugeMetricFamily("actorrt_nodes_alive", "Node slots alive", value=sum(
            n.state == head_pb2.ALIVE for n in reply.view.nodes))
        names: dict[bytes, list[str]] = {}
        for named in reply.named:
            names.setdefault(named.actor_id, []).append(named.name)
        labels = ["name", "label", "class_name", "slot", "actor"]
        queued = GaugeMetricFamily("actorrt_actor_queued", "Tasks waiting in the actor's mailbox", labels=labels)
        executed = CounterMetricFamily("actorrt_actor_executed", "Tasks the actor ran", labels=labels)
        kept = GaugeMetricFamily("actorrt_actor_results_kept_bytes", "Results kept for re-sent tasks", labels=labels)
        published: dict[str, GaugeMetricFamily] = {}
        for node in reply.nodes:
            for actor in node.actors:
                if actor.actor_id == ids.FUNCTIONS:
                    continue
                values = [",".join(sorted(names.get(actor.actor_id, []))), actor.label, actor.class_name,
                          str(node.slot), actor.actor_id.hex()]
                queued.add_metric(values, actor.queued)
                executed.add_metric(values, actor.executed)
                kept.add_metric(values, actor.results_kept_bytes)
                for name, value in sorted(actor.metrics.items()):
                    family = published.get(name)
                    if family is None:
                        family = published[name] = GaugeMetricFamily(
                            f"actorrt_actor_{_NOT_A_NAME.sub('_', name)}", f"{name}, as the actor publishes it",
                            labels=labels)
                    family.add_metric(values, value)
        yield from [alive, queued, executed, kept, *published.values()]


def serve_metrics(host: str, port: int, cluster_stats: Callable[[], head_pb2.ClusterStatsReply]) -> Any:
    """Serve ``/metrics`` on ``host:port`` (0: any free port) from a thread; returns the server
    (``.server_port``, ``.shutdown()``). Call it on the head's loop: ``cluster_stats`` runs there
    (it reads what the loop changes), each scrape waiting for it."""
    loop = asyncio.get_running_loop()

    async def on_loop() -> head_pb2.ClusterStatsReply:
        return cluster_stats()

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector(lambda: asyncio.run_coroutine_threadsafe(on_loop(), loop).result(5.0)))
    server, _ = start_http_server(port, addr=host, registry=registry)
    return server
