"""``actorrt status``: the head, its node slots, its store shards, and the actors that publish metrics."""

from __future__ import annotations

from pathlib import Path

import click

from actorrt.cluster.cli_common import (
    head_address_option,
    live_head_target,
    print_table,
    session_dir_option,
    tls_options,
    token_option,
    with_head,
)
from actorrt.lineage import ids
from actorrt.net.tls import TlsFiles
from actorrt.rpc import head_pb2, node_pb2
from actorrt.store.opening import without_password


@click.command()
@head_address_option
@token_option
@session_dir_option
@tls_options
def status(address: str | None, token: str | None, session_dir: Path | None, tls: TlsFiles | None) -> None:
    """Show the head, its node slots and its store shards."""
    address, token, local = live_head_target(address, token, session_dir)
    reply = with_head(address, token, lambda c: c.cluster_stats(), tls)
    actors = {s.slot: sum(a.actor_id != ids.FUNCTIONS for a in s.actors) for s in reply.nodes}
    memory = {s.slot: _memory_cells(s) for s in reply.nodes}
    view = reply.view
    pid = f" (pid {local.head_pid})" if local is not None else ""
    click.echo(f"head {address}{pid}, view revision {view.revision}"
               + (f", Prometheus metrics on {reply.metrics_url}" if reply.metrics_url else "")
               + (f", dashboard on {reply.dashboard_url}" if reply.dashboard_url else ""))
    rows = [("SLOT", "EPOCH", "STATE", "ADDRESS", "PID", "HOST", "MANAGED", "ACTORS", "SHM_MB", "PINNED_MB",
             "SPILLED_MB", "FREED_MB", "RESTARTS", "LAST_FAILURE")]
    for n in view.nodes:
        rows.append((str(n.slot), str(n.epoch), head_pb2.NodeState.Name(n.state), n.address or "-",
                     str(n.pid or "-"), n.hostname or "-", "yes" if n.managed else "no",
                     str(actors[n.slot]) if n.slot in actors else "-", *memory.get(n.slot, ("-",) * 4),
                     str(max(n.epoch - 1, 0) if n.managed else 0), n.last_failure or "-"))
    print_table(rows)
    published = [(s.slot, a) for s in reply.nodes for a in s.actors if a.metrics or a.label]
    if published:
        click.echo("actors that publish metrics:")
        print_table([("SLOT", "ACTOR", "QUEUED", "METRICS")] + [
            (str(slot), a.label or f"{a.class_name}({a.actor_id.hex()[:8]})", str(a.queued),
             " ".join(f"{name}={value:.4g}" for name, value in sorted(a.metrics.items())) or "-")
            for slot, a in published])
    alive = sum(n.state == head_pb2.ALIVE for n in view.nodes)
    click.echo(f"nodes alive: {alive} of {len(view.nodes)}")
    if view.store_url:
        click.echo(f"lineage store: {without_password(view.store_url)}")
    else:
        def shard(s: head_pb2.StoreShard) -> str:
            replicas = f" (replicas {', '.join(s.replicas)})" if s.replicas else ""
            failovers = f", {s.failovers} failover{'s' * (s.failovers != 1)}" if s.failovers else ""
            return s.address + replicas + failovers

        shards = "; ".join(map(shard, view.store_shards)) or "none"
        click.echo(f"store shards ({len(view.store_shards)}): {shards}")


def _memory_cells(stats: node_pb2.NodeStatsReply) -> tuple[str, str, str, str]:
    """A node's shared memory in use, what it keeps for replays (in memory, spilled), and what it
    has freed of that since start, in MiB."""
    mib = 1 << 20
    kept = stats.objects_kept
    return (f"{stats.shared_memory.in_use_bytes / mib:.0f}", f"{kept.pinned_bytes / mib:.0f}",
            f"{kept.spilled_bytes / mib:.0f}", f"{kept.released_bytes / mib:.0f}")

