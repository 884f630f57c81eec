"""The public API: thin functions over the per-process runtime.

Each function checks its arguments, gets the runtime of this process (``actorrt.core.context``)
and makes one call into it.
"""

from __future__ import annotations

import atexit
import functools
import os
import pickle
import shutil
import signal
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from actorrt.cluster import driver_code, session
from actorrt.cluster.driver import Driver
from actorrt.cluster.head_options import HEARTBEAT_TIMEOUT_S, HeadOptions
from actorrt.cluster.launch import start_head
from actorrt.core import context, values
from actorrt.core.object_ref import ObjectRef
from actorrt.core.task_spec import KILL_METHOD
from actorrt.exceptions import ActorRTError
from actorrt.functions import FunctionOptions, RemoteFunction, check_function_options
from actorrt.handles import ActorClass, ActorHandle, ActorOptions, check_options
from actorrt.lineage.options import (
    DEFAULT_INLINE_MAX_BYTES,
    DEFAULT_PINNED_BUDGET_BYTES,
    DEFAULT_STASH_LIMIT,
    FaultToleranceOptions,
)
from actorrt.util import signals, tracebacks

_lock = threading.Lock()
_PACKAGE_DIR = str(Path(__file__).resolve().parent) + os.sep
# Errors leave the public functions as if raised where the user called them (see util/tracebacks).
_public = functools.partial(tracebacks.at_call_site, ActorRTError)


@_public
def init(
    address: str | None = None,
    *,
    num_nodes: int = 2,
    store_shards: int = 2,
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
) -> dict[str, Any]:
    """Start an embedded cluster, or connect to a running one.

    Args:
        address: ``HOST:PORT`` of a running head, or ``"auto"`` for the one running on this machine
            (found in its session file); None starts a head, ``num_nodes`` node processes
            and ``store_shards`` redis-server shards on ``host``, stopped by ``shutdown()`` or at exit.
        num_nodes: node processes of the embedded cluster.
        store_shards: lineage-store shards of the embedded cluster.
        token: the cluster token (default: ``ACTORRT_TOKEN``, else the local session file).
        host: the address this driver (and an embedded cluster) binds.
        timeout: seconds to wait for the nodes to come up.
        ft: lineage logging of the embedded cluster: ``"lineage_stash"`` (flushes off the critical
            path), ``"write_first"`` (the baseline: the spec is acked by the store before the task
            runs) or ``"none"``. A cluster joined by address keeps its own.
        store_delay_ms: simulated lineage-store latency added to every ack.
        max_forwards: the paper's f: how often an uncommitted task may be forwarded (None: unlimited).
        stash_limit: while a process's stash holds more specs than this (the store is slow or
            down), its submitters wait.
        store_url: an external lineage store for the embedded cluster instead of its own shards:
            ``redis://[:password@]host:port[,host:port...]`` (independent servers, sharded by the
            client) or ``redis+cluster://[:password@]host:port[,...]`` (a Redis Cluster).
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

    Returns:
        ``{"address": head address, "nodes": [...]}``.
    """
    with _lock:
        if context.is_initialized():
            raise ActorRTError("actorrt is already initialized; call actorrt.shutdown() first")
        driver_code.send_modules(runtime_env)
        if address is None:
            if not isinstance(num_nodes, int) or num_nodes < 1:
                raise ValueError(f"num_nodes must be an int >= 1, not {num_nodes!r}")
            ft_options = FaultToleranceOptions(ft, store_delay_ms, max_forwards, stash_limit,
                                               str(Path(checkpoint_dir).absolute()) if checkpoint_dir else "",
                                               inline_max_bytes, pinned_budget_bytes)
            options = HeadOptions(host=host, nodes=num_nodes, store_shards=store_shards, fault_tolerance=ft_options,
                                  store_url=store_url or "", heartbeat_timeout=heartbeat_timeout,
                                  metrics_port=metrics_port)
            session_dir = Path(tempfile.mkdtemp(prefix="actorrt-"))
            try:
                head = start_head(session_dir, options, code_paths=driver_code.search_paths())
            except BaseException:
                shutil.rmtree(session_dir, ignore_errors=True)
                raise
            driver = Driver(head.session.head_address, head.session.token, host, head)
            wait_for = num_nodes
        else:
            address = session.resolve(address)
            driver = Driver(address, session.token_for(address, token), host, None)
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
        return {"address": driver.head_address, "nodes": driver.nodes()}


def _shutdown_unless_busy() -> None:
    if _lock.acquire(blocking=False):  # not if the signal came in the middle of init() or shutdown()
        _lock.release()
        shutdown()


def shutdown() -> None:
    """Stop what ``init()`` started (an embedded cluster) and disconnect. Safe to call twice."""
    with _lock:
        if not context.is_initialized():
            return
        driver = _driver()
        context.set_current(None)
        driver.shutdown()
        signals.forget(signal.SIGTERM)  # as it was before init()


def is_initialized() -> bool:
    """Whether ``init()`` ran in this process (and ``shutdown()`` did not since)."""
    return context.is_initialized()


def remote(target: Any = None, /, **options: Any) -> Any:
    """Make a class a remote actor class, or a function a remote function.

    ``Cls.remote(...)`` creates an actor and returns its handle; ``f.remote(...)`` runs ``f`` on a
    node and returns a ref to its result. ``@actorrt.remote`` or, with options (see
    ``ActorClass.options``, ``RemoteFunction.options``), ``@actorrt.remote(node=1)``.

    Raises:
        TypeError: ``target`` is neither a class nor a function, or an option does not apply to it
            (the message lists the ones that do).
    """
    if target is None:
        if set(options) - set(ActorOptions.__dataclass_fields__) - set(FunctionOptions.__dataclass_fields__):
            check_options(options)  # fits neither: say so now, not at the decorated definition
        return lambda t: remote(t, **options)
    if isinstance(target, type):
        check_options(options)
        return ActorClass(target).options(**options) if options else ActorClass(target)
    if callable(target):
        check_function_options(options)
        return RemoteFunction(target, FunctionOptions(**options))
    raise TypeError(f"@actorrt.remote takes a class or a function, not a {type(target).__name__}")


@_public
def get(refs: ObjectRef | Sequence[ObjectRef], *, timeout: float | None = None) -> Any:
    """The value of a ref, or the values of a list of refs, waiting for them.

    Args:
        refs: one ``ObjectRef``, or a sequence of them.
        timeout: seconds to wait at most (None: as long as it takes).

    Returns:
        The value, or a list of the values in the order of ``refs``.

    Raises:
        TaskError: the method raised (its remote type, message and traceback are attached).
        ActorDiedError: the actor is lost beyond recovery, or its constructor raised.
        GetTimeoutError: the values were not all there within ``timeout`` (also a ``TimeoutError``).
        ActorRTError: called inside an actor task, where ``await ref`` is the way.
        ValueError: ``timeout`` is negative. TypeError: something other than refs was given.
    """
    values.check_timeout(timeout)
    return context.current().get(refs, timeout)


@_public
def wait(refs: Sequence[ObjectRef], *, num_returns: int = 1,
         timeout: float | None = None) -> tuple[list[ObjectRef], list[ObjectRef]]:
    """Wait until ``num_returns`` of ``refs`` are ready (hold a value or an error), or ``timeout``.

    Args:
        refs: a list of distinct ``ObjectRef`` s.
        num_returns: how many ready refs to wait for (1 to ``len(refs)``).
        timeout: seconds to wait at most (None: until ``num_returns`` are ready; 0: what is ready now).

    Returns:
        ``(ready, not_ready)``: at most ``num_returns`` ready refs, and the others, each list in the
        order of ``refs``. ``get`` on a ready ref returns at once (or raises its error).

    Raises:
        TypeError: ``refs`` is not a list of refs. ValueError: ``num_returns`` is out of range, a ref
        is there twice, or ``timeout`` is negative. ActorRTError: called inside an actor task.
    """
    values.check_timeout(timeout)
    return context.current().wait(refs, num_returns, timeout)


@_public
def put(value: Any) -> ObjectRef:
    """Store ``value`` in this process and return a ref to it, as if a task had returned it.

    Pass the ref to many tasks and the value is serialized once here, and sent once to each
    process that needs it, instead of with every call. Its lineage: the value is owned by the
    process that put it, and kept (like any argument passed by ref) until the checkpoints of the
    actors that received it cover those tasks, so their replays find it. A ``put`` inside an actor
    task after its last checkpoint is made again by the replay that rebuilds that actor (one before
    it is lost with its node); a driver's lives as long as the driver.

    Raises:
        TypeError: ``value`` cannot be pickled (the message names its type).
    """
    rt = context.current()
    try:
        return values.put(rt.worker, value)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise TypeError(f"put() cannot serialize a {type(value).__name__}: {exc}") from exc


def cancel(ref: ObjectRef) -> None:
    """Ask that the task making ``ref`` not start, if it has not: then it never runs, and ``get``
    raises ``TaskCancelledError``. A task that started runs to its end. Returns at once.

    The cancellation is recorded in the task's lineage, so a replay after a failure skips the task
    again; one that reached the receiver only after the task started, or after its node failed,
    has no effect. A remote-function call is cancelled while it waits for its arguments.

    Raises:
        TypeError: ``ref`` is not an ``ObjectRef``.
    """
    if not isinstance(ref, ObjectRef):
        raise TypeError(f"cancel() takes the ObjectRef of a task, not {type(ref).__name__}")
    worker = context.current().worker
    worker.call_soon(worker.cancel, ref.object_id)


def kill(actor: ActorHandle) -> None:
    """Stop ``actor``: once the tasks already queued for it have run, every later call raises
    ``ActorDiedError`` saying it was killed. Returns at once.

    Unlike Ray's ``kill``, it does not interrupt the running task or drop the queued ones: the kill
    is a task in the actor's lineage like any other, so a replay after a failure stops the actor at
    the same point, and it stays stopped. A killed actor checkpoints no more, so what its senders
    keep for its replays since its last checkpoint stays. Its name is free again at once.

    Raises:
        TypeError: ``actor`` is not an actor handle.
    """
    if not isinstance(actor, ActorHandle):
        raise TypeError(f"kill() takes an actor handle, not {type(actor).__name__}")
    rt = context.current()
    rt.worker.submitter.submit_task(actor.actor_id, actor.slot, KILL_METHOD, (), {})
    rt.free_actor_names(actor.actor_id)


@_public
def get_actor(name: str) -> ActorHandle:
    """The handle of the actor created with ``options(name=name)``, from any driver of the cluster.

    Raises:
        ValueError: no actor has that name. TypeError: ``name`` is not a str.
        ActorRTError: called inside an actor (pass the handle to it instead).
    """
    if not isinstance(name, str):
        raise TypeError(f"get_actor() takes the actor's name, a str, not {type(name).__name__}")
    found = _driver().get_actor(name)
    return ActorHandle(found.actor_id, found.class_name, tuple(found.methods), found.slot)


@_public
def checkpoint(handles: Sequence[ActorHandle], *, timeout: float | None = None) -> dict[str, Any]:
    """Checkpoint ``handles`` together: a global checkpoint.

    A barrier task goes to each actor behind every task this driver submitted to it before the
    call: the actor saves its state when the barrier reaches the head of its mailbox, between two
    tasks, while its node's other actors keep running. Each file is written atomically, and the
    manifest is written atomically last, into ``<checkpoint_dir>/global/``. Recovery restores an
    actor's newest checkpoint and replays its lineage after it, and the lineage a checkpoint covers
    is collected from the store; replay needs no alignment between actors, since every order they
    depended on is in the lineage.

    Args:
        handles: the actors to checkpoint (or one).
        timeout: seconds to wait for every actor's checkpoint (None: as long as it takes).

    Returns:
        The manifest: ``{"id", "time", "actors": {actor id: {"seq", "path"}}}``.

    Raises:
        TypeError: an element of ``handles`` is not an actor handle.
        GetTimeoutError: some actor had not checkpointed within ``timeout``.
        ActorDiedError: some actor is lost beyond recovery.
        ActorRTError: called inside an actor.
    """
    driver = _driver()
    values.check_timeout(timeout)
    targets = []
    for h in [handles] if isinstance(handles, ActorHandle) else handles:
        if not isinstance(h, ActorHandle):
            raise TypeError(f"checkpoint() takes actor handles, got {type(h).__name__}")
        targets.append((h.actor_id, h.slot))
    return driver.checkpoint(targets, timeout)


async def commit_lineage() -> int:
    """Inside an actor task, before it acts on the outside world (writes a file, a table, calls a
    service): write the task's uncommitted lineage to the store and wait for the acks (end-to-end
    exactly-once).

    From then on a replay after any failure reproduces this task at this point of its actor's
    order, with the same arguments, so it emits the same output: made idempotent, the write is
    exactly-once.

    Returns:
        The number of specs written: 0 when nothing was uncommitted, with ``ft="write_first"``
        (everything is committed before it runs), and with modes that log nothing (which
        guarantee nothing of the kind).

    Raises:
        ActorRTError: called outside an actor task.
    """
    worker = context.current().worker
    sender = context.current_sender.get(None)
    if sender is None or not sender.current_task or worker.ft is None:
        raise ActorRTError("commit_lineage() is for actor tasks: call it as `await actorrt.commit_lineage()` in an "
                           "actor method")
    return await worker.ft.commit_lineage(sender.current_task)


@_public
def rollbacks() -> int:
    """With ``ft="checkpoint"``: how many global rollbacks the cluster has made. A driver loop
    compares it before and after a step: a change means every actor went back to the last global
    checkpoint, and the loop must resume from there (tasks in flight then raise RolledBackError,
    but tasks submitted after it run on the restored state)."""
    return _driver().rollbacks()


@_public
def kill_node(node: int) -> int:
    """SIGKILL node process ``node`` (fail-stop); returns once the cluster has noticed. Returns its pid."""
    if isinstance(node, bool) or not isinstance(node, int):
        raise TypeError(f"kill_node() takes a node slot number (see actorrt.nodes()), not {node!r}")
    return _driver().kill_node(node)


@_public
def nodes() -> list[dict[str, Any]]:
    """The node slots: ``node``, ``epoch``, ``state``, ``address``, ``pid``, ``hostname``, ``host_id`` (who
    shares memory with whom), ``managed``."""
    return _driver().nodes()


@_public
def stats() -> dict[str, Any]:
    """Nodes with their actors and queue sizes, the store shards, and this driver's counters."""
    return _driver().stats()


def _driver() -> Driver:
    rt = context.current()
    if not isinstance(rt, Driver):
        raise ActorRTError("this call is only available in a driver, not inside an actor")
    return rt


atexit.register(shutdown)
