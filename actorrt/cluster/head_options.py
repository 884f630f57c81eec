"""A head's options, defined once: for ``actorrt start --head`` and ``python -m actorrt.cluster.head``.

Both commands take them through the ``head_options`` decorator, and the launcher turns them back
into the head's command line with ``HeadOptions.argv``, so an option is declared in one place.
An external store URL travels in the environment instead (``ACTORRT_STORE_URL``): it may hold
a password, and command lines are visible to other users.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from actorrt.lineage.options import (
    DEFAULT_INLINE_MAX_BYTES,
    DEFAULT_PINNED_BUDGET_BYTES,
    DEFAULT_STASH_LIMIT,
    FaultToleranceMode,
    FaultToleranceOptions,
)
from actorrt.store.opening import STORE_URL_ENV, parse_store_url

# A node that sends no heartbeat for this long is declared dead. Crashes and kills are seen at
# once (process exit, stream close); this bound is for a node that hangs or is cut off. It is
# generous because a node running a long synchronous method also stops sending heartbeats.
HEARTBEAT_TIMEOUT_S = 10.0
MIN_HEARTBEAT_TIMEOUT_S = 1.0
# Nodes and drivers wait this long for an unreachable head (its supervisor restarts it in about a
# second) before they give up on the cluster. Running work does not need the head meanwhile.
HEAD_GRACE_S = 120.0
MAX_STORE_REPLICAS = 4


@dataclass(frozen=True)
class HeadOptions:
    """What a head starts and how its cluster recovers.

    Attributes:
        host: the address the head, its nodes and its store shards bind.
        port: the head's port (0: any free one).
        nodes: node processes the head starts and restarts.
        store_shards: redis-server shards of the lineage store (unless ``store_url`` is given).
        fault_tolerance: the cluster's fault-tolerance mode and its options.
        heartbeat_timeout: seconds without heartbeats before a node is declared dead.
        store_url: an external lineage store instead of the head's own shards.
        metrics_port: serve Prometheus metrics on this port of ``host`` (0: any free port;
            None: no endpoint).
        dashboard_port: serve the web dashboard on this port (0: any free port; None: no dashboard).
        dashboard_host: the address the dashboard binds: loopback unless told otherwise (it is
            behind the cluster token, and HTTPS beyond loopback when the cluster speaks TLS).
        head_grace: seconds nodes and drivers wait for an unreachable head before they give up.
        store_replicas: replicas of each store shard that hold a write before it is acked; the head
            runs them beside its own shards and promotes one in a failed shard's place (an
            external store's operators run its replicas and their failover).
    """

    host: str = "127.0.0.1"
    port: int = 0
    nodes: int = 2
    store_shards: int = 2
    fault_tolerance: FaultToleranceOptions = field(default_factory=FaultToleranceOptions)
    heartbeat_timeout: float = HEARTBEAT_TIMEOUT_S
    store_url: str = ""
    metrics_port: int | None = None
    head_grace: float = HEAD_GRACE_S
    store_replicas: int = 0
    dashboard_port: int | None = None
    dashboard_host: str = "127.0.0.1"

    def __post_init__(self) -> None:
        if not isinstance(self.nodes, int) or self.nodes < 0:
            raise ValueError(f"nodes must be an int >= 0, not {self.nodes!r}")
        if not isinstance(self.store_shards, int) or self.store_shards < 1:
            raise ValueError(f"store_shards must be an int >= 1, not {self.store_shards!r}")
        for name in ("port", "metrics_port", "dashboard_port"):
            value = getattr(self, name)
            if (value is not None or name == "port") and (not isinstance(value, int) or not 0 <= value <= 65535):
                raise ValueError(f"{name} must be an int from 0 to 65535, not {value!r}")
        if not isinstance(self.heartbeat_timeout, int | float) or self.heartbeat_timeout < MIN_HEARTBEAT_TIMEOUT_S:
            raise ValueError(f"heartbeat_timeout must be a number >= {MIN_HEARTBEAT_TIMEOUT_S} (seconds; a node's "
                             f"lease is half of it, renewed at every heartbeat), "
                             f"not {self.heartbeat_timeout!r}")
        if not isinstance(self.store_replicas, int) or not 0 <= self.store_replicas <= MAX_STORE_REPLICAS:
            raise ValueError(f"store_replicas must be an int from 0 to {MAX_STORE_REPLICAS}, "
                             f"not {self.store_replicas!r}")
        if not isinstance(self.dashboard_host, str) or not self.dashboard_host:
            raise ValueError(f"dashboard_host must be an address to bind (127.0.0.1 by default; 0.0.0.0 for every "
                             f"interface), not {self.dashboard_host!r}")
        if not isinstance(self.head_grace, int | float) or self.head_grace <= 0:
            raise ValueError(f"head_grace must be a number > 0 (seconds), not {self.head_grace!r}")

    def check_store_url(self) -> None:
        """Raise ValueError naming what is wrong with ``store_url`` (a head checks it before it
        starts, so a bad URL stops it there and not every node later)."""
        if self.store_url:
            parse_store_url(self.store_url)

    def argv(self) -> list[str]:
        """These options as the head's command-line arguments (all but ``store_url``)."""
        ft = self.fault_tolerance
        out = ["--host", self.host, "--port", str(self.port), "--nodes", str(self.nodes),
               "--store-shards", str(self.store_shards), "--ft", ft.mode.value,
               "--store-delay-ms", str(ft.store_delay_ms), "--stash-limit", str(ft.stash_limit),
               "--heartbeat-timeout", str(self.heartbeat_timeout), "--inline-max-bytes", str(ft.inline_max_bytes),
               "--pinned-budget-bytes", str(ft.pinned_budget_bytes), "--head-grace", str(self.head_grace),
               "--store-replicas", str(self.store_replicas)]
        if ft.max_forwards is not None:
            out += ["--max-forwards", str(ft.max_forwards)]
        if ft.checkpoint_dir:
            out += ["--checkpoint-dir", ft.checkpoint_dir]
        if self.metrics_port is not None:
            out += ["--metrics-port", str(self.metrics_port)]
        if self.dashboard_port is not None:
            out += ["--dashboard-port", str(self.dashboard_port), "--dashboard-host", self.dashboard_host]
        return out


_OPTIONS = [
    click.option("--host", default="127.0.0.1", show_default=True,
                 help="Address to bind; other machines must be able to reach it."),
    click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535),
                 help="Head port (0: any free port)."),
    click.option("--nodes", default=2, show_default=True, type=click.IntRange(min=0),
                 help="Node processes the head starts and restarts."),
    click.option("--store-shards", default=2, show_default=True, type=click.IntRange(min=1),
                 help="redis-server shards of the lineage store."),
    click.option("--ft", type=click.Choice([m.value for m in FaultToleranceMode]), default="lineage_stash",
                 show_default=True, help="Fault tolerance of the cluster."),
    click.option("--store-delay-ms", default=0.0, show_default=True, type=click.FloatRange(min=0),
                 help="Simulated lineage-store latency added to every ack."),
    click.option("--max-forwards", default=None, type=click.IntRange(min=0),
                 help="How often an uncommitted task may be forwarded, the paper's f (default unlimited)."),
    click.option("--stash-limit", default=DEFAULT_STASH_LIMIT, show_default=True, type=click.IntRange(min=1),
                 help="While a process's stash holds more specs than this, its submitters wait."),
    click.option("--checkpoint-dir", default=None, type=click.Path(file_okay=False, path_type=Path),
                 help="Where actors write checkpoints; every node must reach it (default SESSION_DIR/checkpoints)."),
    click.option("--inline-max-bytes", default=DEFAULT_INLINE_MAX_BYTES, show_default=True,
                 type=click.IntRange(min=0),
                 help="A larger argument travels beside its task, named by id in its spec, not in it."),
    click.option("--pinned-budget-bytes", default=DEFAULT_PINNED_BUDGET_BYTES, show_default=True,
                 type=click.IntRange(min=0),
                 help="Bytes a process keeps in memory for other actors' replays; past it, on local disk."),
    click.option("--heartbeat-timeout", default=HEARTBEAT_TIMEOUT_S, show_default=True,
                 type=click.FloatRange(min=0, min_open=True),
                 help="Seconds without heartbeats before a node is declared dead."),
    click.option("--store-url", default=None, envvar=STORE_URL_ENV, show_envvar=True,
                 help="An external lineage store instead of the head's own shards: "
                      "redis://[:PASSWORD@]HOST:PORT[,HOST:PORT...] or redis+cluster://[:PASSWORD@]HOST:PORT; "
                      "rediss:// or rediss+cluster:// over TLS."),
    click.option("--metrics-port", default=None, type=click.IntRange(0, 65535),
                 help="Serve Prometheus metrics of the cluster's nodes and actors on this port (0: any free port)."),
    click.option("--dashboard-port", default=None, type=click.IntRange(0, 65535),
                 help="Serve the web dashboard on this port (0: any free port); log in with the cluster token."),
    click.option("--dashboard-host", default="127.0.0.1", show_default=True,
                 help="Address the dashboard binds (loopback unless told; HTTPS beyond it when the cluster has TLS)."),
    click.option("--store-replicas", default=0, show_default=True, type=click.IntRange(0, MAX_STORE_REPLICAS),
                 help="Replicas of each store shard that hold a write before it is acked (the head runs them "
                      "beside its shards and promotes one in a failed shard's place)."),
    click.option("--head-grace", default=HEAD_GRACE_S, show_default=True, type=click.FloatRange(min=0, min_open=True),
                 help="Seconds nodes and drivers wait for an unreachable head before they give up on the cluster."),
]
# The parameter names of the options above, in click's spelling.
OPTION_NAMES = ("host", "port", "nodes", "store_shards", "ft", "store_delay_ms", "max_forwards", "stash_limit",
                "checkpoint_dir", "inline_max_bytes", "pinned_budget_bytes", "heartbeat_timeout", "store_url",
                "metrics_port", "dashboard_port", "dashboard_host", "store_replicas", "head_grace")


def _from_values(host: str, port: int, nodes: int, store_shards: int, ft: str, store_delay_ms: float,
                 max_forwards: int | None, stash_limit: int, checkpoint_dir: Path | None, inline_max_bytes: int,
                 pinned_budget_bytes: int, heartbeat_timeout: float, store_url: str | None,
                 metrics_port: int | None, dashboard_port: int | None, dashboard_host: str, store_replicas: int,
                 head_grace: float) -> HeadOptions:
    try:
        return HeadOptions(host, port, nodes, store_shards,
                           FaultToleranceOptions(ft, store_delay_ms, max_forwards, stash_limit,
                                                 str(checkpoint_dir.absolute()) if checkpoint_dir else "",
                                                 inline_max_bytes, pinned_budget_bytes),
                           heartbeat_timeout, store_url or "", metrics_port, head_grace, store_replicas,
                           dashboard_port, dashboard_host)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def head_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give a click command the head's options; it receives them as ``head: HeadOptions``."""

    @functools.wraps(command)
    def with_options(*args: Any, **kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) for name in OPTION_NAMES}
        return command(*args, head=_from_values(**values), **kwargs)

    for option in reversed(_OPTIONS):
        with_options = option(with_options)
    return with_options
