"""The public API: thin functions over the per-process runtime.

Each function checks its arguments, gets the runtime of this process (``actorrt.core.context``)
and makes one call into it. Joining a cluster and leaving it (``init``, ``shutdown``) are
``lifecycle.py``'s.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import Any

from actorrt import lineage
from actorrt.core import context, values
from actorrt.core.object_ref import ObjectRef
from actorrt.core.record_lineage import lineage_store, relation_queue
from actorrt.exceptions import ActorRTError
from actorrt.functions import FunctionOptions, RemoteFunction, function_options
from actorrt.handles import ActorClass, ActorHandle, ActorOptions, actor_options
from actorrt.lifecycle import current_driver, public
from actorrt.store.relations import RelationReader


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
            actor_options(dict(options))  # fits neither: say so now, not at the decorated definition
        return lambda t: remote(t, **options)
    if isinstance(target, type):
        options = actor_options(options)
        return ActorClass(target).options(**options) if options else ActorClass(target)
    if callable(target):
        return RemoteFunction(target, FunctionOptions(**function_options(options)))
    raise TypeError(f"@actorrt.remote takes a class or a function, not a {type(target).__name__}")


@public
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


@public
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


@public
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
    rt = context.current_or_start()
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
    """Stop ``actor`` now: the ``async def`` method it awaits is interrupted (``CancelledError``
    at its await), the tasks queued for it are skipped, and each of those, like every later call,
    raises ``ActorDiedError`` saying it was killed. Returns at once.

    A plain method cannot be interrupted: it runs to its end first (so does a call of an actor
    with ``max_concurrency``). The kill is a task in the actor's lineage like any other, and where
    it interrupted the method is recorded: a replay after a failure stops the actor at the same
    point, and it stays stopped. A killed actor checkpoints no more, so what its senders keep for
    its replays since its last checkpoint stays. Its name is free again at once.

    Raises:
        TypeError: ``actor`` is not an actor handle.
    """
    if not isinstance(actor, ActorHandle):
        raise TypeError(f"kill() takes an actor handle, not {type(actor).__name__}")
    rt = context.current()
    rt.worker.kill(actor.actor_id, actor.slot)
    rt.free_actor_names(actor.actor_id)


@public
def get_actor(name: str) -> ActorHandle:
    """The handle of the actor created with ``options(name=name)``, from any driver of the cluster.

    Raises:
        ValueError: no actor has that name. TypeError: ``name`` is not a str.
        ActorRTError: called inside an actor (pass the handle to it instead).
    """
    if not isinstance(name, str):
        raise TypeError(f"get_actor() takes the actor's name, a str, not {type(name).__name__}")
    found = current_driver().get_actor(name)
    return ActorHandle(found.actor_id, found.class_name, tuple(found.methods), found.slot)


@public
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
    driver = current_driver()
    values.check_timeout(timeout)
    targets = []
    for h in [handles] if isinstance(handles, ActorHandle) else handles:
        if not isinstance(h, ActorHandle):
            raise TypeError(f"checkpoint() takes actor handles, got {type(h).__name__}")
        targets.append((h.actor_id, h.slot))
    return driver.checkpoint(targets, timeout)


async def ran(ref: ObjectRef) -> None:
    """Wait until the call that makes ``ref`` has run, as back-pressure does (a producer that
    keeps at most N calls unprocessed at a consumer), without fetching what it need not.

    ``await ref`` would ask for the value. A replayed actor sends its calls again; a receiver
    that ran one before answers it from its ledger, a round trip per call that the replay would
    wait for. ``ran`` counts such a call as run at once, and the replay goes on. Otherwise it
    awaits the value, and raises the call's error, as ``await ref`` does.

    Raises:
        The call's error (``ActorMethodError``, ``ActorDiedError``, ...), where the value is awaited.
    """
    if not isinstance(ref, ObjectRef):
        raise TypeError(f"ran() takes an ObjectRef, not {type(ref).__name__}")
    await values.ran(context.current().worker, ref)


async def commit_lineage() -> int:
    """Inside an actor task, before it acts on the outside world (writes a file, a table, calls a
    service): write the task's uncommitted lineage to the store and wait for the acks (end-to-end
    exactly-once). Record lineage queued so far (``actorrt.lineage.relate``) is written too, so a
    query then sees it.

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
    written = await worker.ft.commit_lineage(sender.current_task)
    if hasattr(worker.ft, "write_relations"):
        await worker.ft.write_relations()
    actor = worker.host.actors.get(sender.sender_id) if worker.host is not None else None
    if actor is not None and actor.held is not None:
        actor.held.release()  # (a checkpointing actor's: what it held is reproducible now)
    return written


@public
def rollbacks() -> int:
    """With ``ft="checkpoint"``: how many global rollbacks the cluster has made. A driver loop
    compares it before and after a step: a change means every actor went back to the last global
    checkpoint, and the loop must resume from there (tasks in flight then raise RolledBackError,
    but tasks submitted after it run on the restored state). A failure that the rollback frontier
    confines to some nodes (no driver took an answer that went back) does not count: the
    driver's calls to the restored actors are sent again, and it sees nothing."""
    return current_driver().rollbacks()


@public
def kill_node(node: int) -> int:
    """SIGKILL node process ``node`` (fail-stop); returns once the cluster has noticed. Returns its pid."""
    if isinstance(node, bool) or not isinstance(node, int):
        raise TypeError(f"kill_node() takes a node slot number (see actorrt.nodes()), not {node!r}")
    return current_driver().kill_node(node)


@public
def nodes() -> list[dict[str, Any]]:
    """The node slots: ``node``, ``epoch``, ``state``, ``address``, ``pid``, ``hostname``, ``host_id`` (who
    shares memory with whom), ``managed``."""
    return current_driver().nodes()


@public
def stats() -> dict[str, Any]:
    """Nodes with their actors and queue sizes, the store shards, and this driver's counters."""
    return current_driver().stats()


def _lineage_query(make: Any, timeout: float | None) -> Any:
    """Run a record lineage query (``actorrt.lineage``) against this driver's lineage store."""
    driver = current_driver()
    return driver.call(make(RelationReader(lineage_store())), timeout=timeout)


lineage._run = _lineage_query
lineage._relate = lambda namespace, output, inputs, keep_s: relation_queue().add_named(namespace, output, inputs,
                                                                                      keep_s)
