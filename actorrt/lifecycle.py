"""Joining a cluster and leaving it: ``actorrt.init``, which starts an embedded cluster when given
no address, and ``actorrt.shutdown``, which stops what ``init`` started (also on SIGTERM and at
exit).

``init`` makes this process a driver: ``current_driver`` is how the public functions that only a
driver may call (``actorrt.nodes``, ``actorrt.checkpoint``, ...) find it.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import shutil
import signal
import tempfile
import threading
import urllib.parse
from pathlib import Path
from typing import Any

from actorrt.cluster import driver_code, session
from actorrt.cluster.driver import Driver
from actorrt.cluster.head_options import HEAD_GRACE_S, HEARTBEAT_TIMEOUT_S, HeadOptions
from actorrt.cluster.launch import start_head
from actorrt.core import context
from actorrt.exceptions import ActorRTError
from actorrt.lineage.options import (
    DEFAULT_INLINE_MAX_BYTES,
    DEFAULT_PINNED_BUDGET_BYTES,
    DEFAULT_STASH_LIMIT,
    FaultToleranceOptions,
)
from actorrt.net.tls import TlsFiles
from actorrt.util import signals, tracebacks

_lock = threading.Lock()
log = logging.getLogger(__name__)
# The node processes of an embedded cluster, unless init() is told otherwise.
DEFAULT_NUM_NODES = 2
_PACKAGE_DIR = str(Path(__file__).resolve().parent) + os.sep
# Errors leave init() and the functions of ``actorrt.api`` as if raised where the user called them
# (see util/tracebacks).
public = functools.partial(tracebacks.at_call_site, ActorRTError)


@public
def init(
    address: str | None = None,
    *,
    num_nodes: int = DEFAULT_NUM_NODES,
    store_shards: int = 2,
    store_replicas: int = 0,
    token: str | None = None,
    host: str = "127.0.0.1",
    timeout: float = 60.0,
    ft: str = "lineage_stash",
    store_delay_ms: float = 0.0,
    max_forwards: int | None = None,
    stash_limit: int = DEFAULT_STASH_LIMIT,
    store_url: str | None = None,
    checkpoint_dir: str | Path | None = None,
    inline_max_bytes: int = DEFAULT_INLINE_MAX_BYTES,
    pinned_budget_bytes: int = DEFAULT_PINNED_BUDGET_BYTES,
    heartbeat_timeout: float = HEARTBEAT_TIMEOUT_S,
    runtime_env: dict[str, Any] | None = None,
    metrics_port: int | None = None,
    head_grace: float = HEAD_GRACE_S,
    dashboard_port: int | None = None,
    dashboard_host: str = "127.0.0.1",
) -> dict[str, Any]:
    """Start an embedded cluster, or connect to a running one.

    Args:
        address: ``HOST:PORT`` of a running head, or ``"auto"`` for the one running on this machine
            (found in its session file); None starts a head, ``num_nodes`` node processes
            and ``store_shards`` redis-server shards on ``host``, stopped by ``shutdown()`` or at exit.
        num_nodes: node processes of the embedded cluster.
        store_shards: lineage-store shards of the embedded cluster.
        store_replicas: replicas of each store shard that hold a write before it is acked; the
            embedded cluster promotes one in the place of a shard that fails.
        token: the cluster token (default: ``ACTORRT_TOKEN``, else the local session file). With
            ``ACTORRT_TLS_CERT``, ``ACTORRT_TLS_KEY`` and ``ACTORRT_TLS_CA`` set, this driver (and an
            embedded cluster) speaks mutual TLS with those files; the certificate must name ``host``.
        host: the address this driver (and an embedded cluster) binds.
        timeout: seconds to wait for the nodes to come up.
        ft: how the embedded cluster survives a node failure: ``"lineage_stash"`` (lineage
            logged, flushed off the critical path; the lost node's actors replay), ``"write_first"``
            (the baseline: the spec is acked by the store before the task runs), ``"checkpoint"``
            (nothing logged; the failed node and those the rollback frontier names go back to the
            last global checkpoint), ``"global_rollback"`` (the baseline: every node goes back) or
            ``"none"``. A cluster joined by address keeps its own.
        store_delay_ms: simulated lineage-store latency added to every ack.
        max_forwards: the paper's f: how often an uncommitted task may be forwarded (None: unlimited).
        stash_limit: while a process's stash holds more specs than this (the store is slow or
            down), its submitters wait.
        store_url: an external lineage store for the embedded cluster instead of its own shards:
            ``redis://[:password@]host:port[,host:port...]`` (independent servers, sharded by the
            client) or ``redis+cluster://[:password@]host:port[,...]`` (a Redis Cluster); ``rediss``
            for either over TLS.
        checkpoint_dir: where actors of the embedded cluster write checkpoints (default: in its
            session directory); every node must reach it.
        inline_max_bytes: an argument that serializes to more bytes than this is not written into
            its task's spec: it travels beside the task, and its sender keeps it for replays.
        pinned_budget_bytes: what each process keeps in memory for other actors' replays (the
            arguments of tasks it sent, until their receivers checkpoint); past it, on local disk.
        heartbeat_timeout: seconds without heartbeats before the embedded cluster declares a node
            dead (a hung node; a crash is seen at once). A node that resumes after it is fenced off.
        runtime_env: code for the nodes to run that they cannot import: ``{"py_modules": [module or
            name, ...]}`` sends those modules by value with the classes and functions that use them.
            Not needed for the embedded cluster, whose processes run in this driver's working
            directory with its ``sys.path``.
        metrics_port: the embedded cluster's head serves Prometheus metrics of its nodes and actors
            (stream operators' rates, backlog and latencies among them) at
            ``http://host:metrics_port/metrics``; None (the default) serves none.
        head_grace: seconds the embedded cluster's nodes and this driver wait for an unreachable
            head (its supervisor restarts one that dies at once) before they give up on the cluster.
        dashboard_port: the embedded cluster's head serves its web dashboard (nodes, actors,
            flows, recoveries, lineage store) on this port (0: any free one); None serves none.
        dashboard_host: the address the dashboard binds; loopback unless told otherwise.

    Returns:
        ``{"address": head address, "nodes": [...]}``, and ``"dashboard_url"`` where the embedded
        cluster serves a dashboard: a link that logs the browser in with the cluster token.
    """
    with _lock:
        if context.is_initialized():
            raise ActorRTError("actorrt is already initialized; call actorrt.shutdown() first")
        driver_code.send_modules(runtime_env)
        tls = TlsFiles.from_env()
        if tls is not None:
            tls.check_names(host)  # before an embedded head starts on it
        if address is None:
            if not isinstance(num_nodes, int) or num_nodes < 1:
                raise ValueError(f"num_nodes must be an int >= 1, not {num_nodes!r}")
            ft_options = FaultToleranceOptions(ft, store_delay_ms, max_forwards, stash_limit,
                                               str(Path(checkpoint_dir).absolute()) if checkpoint_dir else "",
                                               inline_max_bytes, pinned_budget_bytes)
            options = HeadOptions(host=host, nodes=num_nodes, store_shards=store_shards, store_replicas=store_replicas,
                                  fault_tolerance=ft_options,
                                  store_url=store_url or "", heartbeat_timeout=heartbeat_timeout,
                                  metrics_port=metrics_port, head_grace=head_grace,
                                  dashboard_port=dashboard_port, dashboard_host=dashboard_host)
            session_dir = Path(tempfile.mkdtemp(prefix="actorrt-"))
            try:
                head = start_head(session_dir, options, code_paths=driver_code.search_paths(), tls=tls)
            except BaseException:
                shutil.rmtree(session_dir, ignore_errors=True)
                raise
            driver = Driver(head.session.head_address, head.session.token, host, head, tls)
            wait_for = num_nodes
        else:
            address = session.resolve(address)
            driver = Driver(address, session.token_for(address, token), host, None, tls)
            head, wait_for = None, 1
        try:
            driver.start(wait_for, timeout)
        except BaseException:
            if head is not None:
                head.process.kill()
                head.wait_stopped()
            raise
        context.set_current(driver)
        tracebacks.hide_frames_under(ActorRTError, _PACKAGE_DIR)
        if head is not None:  # a SIGTERM stops the embedded cluster and removes its session directory
            signals.clean_up_before(signal.SIGTERM, _shutdown_unless_busy)
        out = {"address": driver.head_address, "nodes": driver.nodes()}
        if head is not None and head.session.dashboard_url:
            out["dashboard_url"] = f"{head.session.dashboard_url}?token={urllib.parse.quote(head.session.token)}"
        return out


def _shutdown_unless_busy() -> None:
    if _lock.acquire(blocking=False):  # not if the signal came in the middle of init() or shutdown()
        _lock.release()
        shutdown()


def shutdown() -> None:
    """Stop what ``init()`` started (an embedded cluster) and disconnect. Safe to call twice."""
    with _lock:
        if not context.is_initialized():
            return
        driver = current_driver()
        context.set_current(None)
        driver.shutdown()
        signals.forget(signal.SIGTERM)  # as it was before init()


def is_initialized() -> bool:
    """Whether ``init()`` ran in this process (and ``shutdown()`` did not since)."""
    return context.is_initialized()


def current_driver() -> Driver:
    """This process's driver; an error inside an actor, where the driver-only functions do not apply."""
    rt = context.current()
    if not isinstance(rt, Driver):
        raise ActorRTError("this call is only available in a driver, not inside an actor")
    return rt


def _start_by_default() -> None:
    """``init()`` with its defaults, for a ``.remote()`` or a ``put()`` made before any (as Ray does)."""
    log.warning("actorrt.init() was not called: starting an embedded cluster with its defaults (%d nodes; call "
                "actorrt.init(...) first to choose, or address=... to join one)", DEFAULT_NUM_NODES)
    try:
        init()
    except ActorRTError:
        if not context.is_initialized():  # (else another thread started it meanwhile)
            raise


context.set_default_start(_start_by_default)
atexit.register(shutdown)
