"""What each page of the dashboard shows, as JSON: built from the head's newest stats and its
history once a second while a page is open, and sent to every open page at once."""

from __future__ import annotations

from typing import Any

from actorrt.dashboard.flows import finite_metrics
from actorrt.dashboard.history import History, bytes_per_task, lineage_processes
from actorrt.lineage import ids
from actorrt.rpc import head_pb2, node_pb2

# The recoveries page shows the latest failures, each with its flows' latency from this long
# before it to this long after its recovery.
FAILURES_SHOWN = 20
AROUND_S = 10.0
CHART_S = 120.0  # the live charts' span


def snapshot(stats: head_pb2.ClusterStatsReply, history: History, head: dict[str, Any],
             shards: dict[str, dict | str], now: float) -> dict[str, Any]:
    return {"now": now, "head": head, "cluster": cluster(stats, history, shards, now, head),
            "actors": actors(stats, history), "flows": flows(history, now),
            "recoveries": recoveries(history), "lineage": lineage(stats, history, now)}


def cluster(stats: head_pb2.ClusterStatsReply, history: History, shards: dict[str, dict | str], now: float,
            head: dict[str, Any]) -> dict[str, Any]:
    by_slot = {n.slot: n for n in stats.nodes}
    nodes = []
    for info in stats.view.nodes:
        n = by_slot.get(info.slot)
        nodes.append({
            "slot": info.slot, "epoch": info.epoch, "state": head_pb2.NodeState.Name(info.state).lower(),
            "address": info.address, "pid": info.pid, "hostname": info.hostname, "managed": info.managed,
            "heir": info.heir if info.HasField("heir") else None, "last_failure": info.last_failure,
            "cpu_percent": n.cpu_percent if n else None, "rss_bytes": n.rss_bytes if n else None,
            "heartbeat_age_s": head["heartbeats"].get(info.slot),
            "actors": sum(a.actor_id != ids.FUNCTIONS for a in n.actors) if n else 0,
        })
    return {"nodes": nodes,
            "shards": [shard(s, shards.get(s.address, "no answer yet")) for s in stats.view.store_shards],
            "external_store": bool(stats.view.store_url), "drivers": len(stats.view.drivers),
            "rollbacks": stats.view.rollbacks, "mode": stats.view.fault_tolerance.mode,
            "series": history.nodes.columns(now - CHART_S)}


def shard(s: head_pb2.StoreShard, info: dict | str) -> dict[str, Any]:
    out: dict[str, Any] = {"address": s.address, "pid": s.pid, "restarts": s.restarts, "failovers": s.failovers,
                           "replicas": list(s.replicas)}
    if isinstance(info, str):
        return {**out, "error": info}
    offset = int(info.get("master_repl_offset", 0))
    lags = [offset - int(v.get("offset", offset)) for k, v in info.items()
            if k.startswith("slave") and isinstance(v, dict)]
    keys = sum(int(v.get("keys", 0)) for k, v in info.items() if k.startswith("db") and isinstance(v, dict))
    return {**out, "used_memory_bytes": int(info.get("used_memory", 0)), "keys": keys,
            "ops_per_s": int(info.get("instantaneous_ops_per_sec", 0)),
            "write_kb_per_s": float(info.get("instantaneous_input_kbps", 0.0)),
            "replication_lag_bytes": max(lags) if lags else None}


def names_of(stats: head_pb2.ClusterStatsReply) -> dict[bytes, list[str]]:
    names: dict[bytes, list[str]] = {}
    for named in stats.named:
        names.setdefault(named.actor_id, []).append(named.name)
    return names


def actor_row(node: node_pb2.NodeStatsReply, a: node_pb2.ActorStats, names: dict[bytes, list[str]],
              history: History) -> dict[str, Any]:
    return {"id": a.actor_id.hex(), "class_name": a.class_name, "name": ",".join(sorted(names.get(a.actor_id, []))),
            "label": a.label, "slot": node.slot, "epoch": node.epoch, "state": "dead" if a.dead else "alive",
            "queued": a.queued, "executed": a.executed, "restarts": history.restarts.get(a.actor_id, 0),
            "results_kept_bytes": a.results_kept_bytes, "metrics": finite_metrics(a),
            "standby": a.standby if a.HasField("standby") else None}


def actors(stats: head_pb2.ClusterStatsReply, history: History) -> list[dict[str, Any]]:
    names = names_of(stats)
    out = [actor_row(n, a, names, history) for n in stats.nodes for a in n.actors if a.actor_id != ids.FUNCTIONS]
    return sorted(out, key=lambda a: (a["slot"], a["label"] or a["class_name"], a["id"]))


def flows(history: History, now: float) -> list[dict[str, Any]]:
    return [{**flow.as_json(), "series": history.flow_columns(name, now - CHART_S)}
            for name, flow in history.last_flows.items()]


def recoveries(history: History) -> list[dict[str, Any]]:
    out = []
    for f in history.failures.recent(FAILURES_SHOWN):
        latency = {}
        until = f.at + sum(ms for _, ms in f.phases()) / 1e3 + AROUND_S
        for name in f.flows or []:
            columns = history.flow_columns(name, f.at - AROUND_S, until)
            latency[name] = {"t": columns["t"], "latency_p99_ms": columns.get("latency_p99_ms", []),
                             "records_out_per_s": columns.get("records_out_per_s", [])}
        out.append({**f.as_json(), "latency": latency})
    return out


def lineage(stats: head_pb2.ClusterStatsReply, history: History, now: float) -> dict[str, Any]:
    processes = []
    for p in lineage_processes(stats):
        s = p.stats
        processes.append({"key": p.key, "process": f"node {p.slot}" if p.slot is not None else p.key,
                          "slot": p.slot, "epoch": p.epoch, "stash_size": s.stash_size, "flushed": s.flushed,
                          "committed": s.committed,
                          "store_latency_ms_p50": s.store_latency_ms_p50,
                          "store_latency_ms_mean": s.store_latency_ms_mean, "bytes_written": s.store_bytes_written,
                          "bytes_per_task": bytes_per_task(s), "forwarded_mean": s.forwarded_mean,
                          "specs_per_write": s.flushed / s.store_writes if s.store_writes else None,
                          "refused": s.refused})
    return {"mode": stats.view.fault_tolerance.mode, "processes": processes,
            "series": history.lineage.columns(now - CHART_S)}
