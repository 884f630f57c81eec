"""What a process does with refs: awaits their values (any task), ``get`` and ``wait`` them
(a driver's threads, blocking), and ``put`` values.

``get`` and ``wait`` run on the worker's loop and block the calling thread, never the loop. A
timeout of 0 means "what is here now": each ref gets one step of the loop to resolve, which a
value this process holds (or has fetched) needs, and nothing more. A fetch that a timeout
interrupts goes on, and what ``wait`` found ready is kept, for the next ``get`` or ``wait`` of
the ref: polling a ref another process owns fetches it once. What is kept goes with the ref (its
arrays would hold their shared segment after the object is freed).

``put`` stores a value in this process and returns a ref it owns, as a task's result would be:
passed to many tasks, the value is sent once to each process that needs it, and kept for the
replays of those tasks like any argument passed by ref. Its ID derives from the putter (an
actor, or the driver) and a counter that is part of the putter's state, so a replayed actor that
puts again makes the same ID, and the value is made again by the replay that rebuilds its owner.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from actorrt.core import context
from actorrt.core.object_ref import ObjectRef
from actorrt.core.serialization import deserialize, exception_from_error, object_value
from actorrt.exceptions import ActorRTError, GetTimeoutError
from actorrt.lineage import ids
from actorrt.rpc import common_pb2 as pb

if TYPE_CHECKING:
    from actorrt.core.worker import Worker

# The receiver ID a process's puts are counted under (no actor has it).
PUT_COUNTER = b"actorrt.put"


def check_timeout(timeout: Any) -> None:
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0):
        raise ValueError(f"timeout must be a number of seconds >= 0, or None, not {timeout!r}")


async def value_of(worker: Worker, ref: ObjectRef) -> Any:
    """The value of ``ref``, fetched if another process owns it (on the worker's loop). An actor
    task or a function call that awaits it is watched for cycles of awaits (``core/awaits.py``)."""
    proto = ref.to_proto()
    try:
        waiter = context.current_sender.get(None)
        value = await worker.awaits.watch(waiter, proto, lambda: worker.fetches.resolve(proto))
        if value.WhichOneof("kind") == "error":
            if value.error.kind == pb.RESULT_NOT_KEPT and worker.host is not None:
                worker.host.replay_lost_result(worker.submitter.sender(), value.error)
            worker.unretrieved.raised(value.error)
            raise exception_from_error(value.error)
        return deserialize(value.value)
    finally:
        worker.fetches.unborrow(ref.object_id)


async def ran(worker: Worker, ref: ObjectRef) -> None:
    """Once the call that makes ``ref`` has run (``actorrt.ran``): a call a replay sends again
    whose receiver ran it before is deferred (``Outbox.send_task``), and counts as run without
    asking the receiver for its result; any other is awaited as ``await ref`` is."""
    if worker.on_loop_thread() and worker.objects.is_deferred(ref.object_id):
        return
    await ref


def _as_refs(what: str, refs: Any, one_allowed: bool = False) -> list[ObjectRef]:
    if one_allowed and isinstance(refs, ObjectRef):
        return [refs]
    if isinstance(refs, ObjectRef) or not isinstance(refs, Sequence | set | frozenset):
        raise TypeError(f"{what}() takes {'an ObjectRef or ' if one_allowed else ''}a list of ObjectRefs, "
                        f"not {type(refs).__name__}")
    out = list(refs)
    for i, r in enumerate(out):
        if not isinstance(r, ObjectRef):
            raise TypeError(f"{what}(): element {i} is a {type(r).__name__}, not an ObjectRef")
    return out


def _blocking(worker: Worker, what: str) -> None:
    if worker.on_loop_thread():
        raise ActorRTError(f"actorrt.{what}() would block the event loop of every actor here: in an async def "
                           f"method, `await ref` (or asyncio.wait); a plain method may call {what}() where its "
                           f"code shows the call (directly, or in a function of its module or a method of its "
                           f"class, which runs it in a thread of its own), not through a function passed to it")


# Values a wait found ready, or a get that timed out left on their way, at most (the oldest go).
POLLS_KEPT = 10_000


def _value_task(worker: Worker, ref: ObjectRef) -> asyncio.Task:
    """The task that gets ``ref``'s value: one an earlier wait or timed-out get left, else a new one
    (a ref another process owns is fetched once, however often it is polled)."""
    task = worker.polls.pop(ref.object_id, None)
    return task if task is not None else asyncio.ensure_future(value_of(worker, ref))


def _keep(worker: Worker, ref: ObjectRef, task: asyncio.Task) -> None:
    worker.polls[ref.object_id] = task
    ref._polled = True  # dropped when the ref goes (``Worker.release``)
    # An error is an answer here: the get that takes it up raises it (and if none does, the
    # failure was the caller's to ignore, as after a get that raised another ref's error first).
    task.add_done_callback(lambda t: t.cancelled() or t.exception())
    while len(worker.polls) > POLLS_KEPT:
        oldest = next(iter(worker.polls))
        worker.polls.pop(oldest).cancel()


def get(worker: Worker, refs: ObjectRef | Sequence[ObjectRef], timeout: float | None) -> Any:
    """The value of ``refs`` (one ref), or their values (a list of them), waiting ``timeout`` at most."""
    _blocking(worker, "get")
    items = _as_refs("get", refs, one_allowed=True)
    for ref in items:
        ref._retrieved = True  # its error, if it has one, is the caller's to see from here

    async def gather() -> list[Any]:
        tasks = {r: _value_task(worker, r) for r in dict.fromkeys(items)}
        if tasks:
            await asyncio.wait(tasks.values(), timeout=timeout, return_when=asyncio.FIRST_EXCEPTION)
        late = [r for r, t in tasks.items() if not t.done()]
        for r in late:  # still on its way: a later get or wait takes it up where this one left it
            _keep(worker, r, tasks[r])
        failed = [t for t in tasks.values() if t.done() and t.exception() is not None]
        if failed:  # an error is raised at once, whatever is still on its way
            raise failed[0].exception()
        if late:
            raise GetTimeoutError(f"get() timed out after {timeout} s: {len(late)} of {len(tasks)} values were "
                                  f"not ready")
        return [tasks[r].result() for r in items]

    values = asyncio.run_coroutine_threadsafe(gather(), worker.loop).result()
    return values[0] if isinstance(refs, ObjectRef) else values


def wait(worker: Worker, refs: Sequence[ObjectRef], num_returns: int,
         timeout: float | None) -> tuple[list[ObjectRef], list[ObjectRef]]:
    """``(ready, not_ready)``: the first ``num_returns`` of ``refs`` to be ready (a value or an
    error), or fewer if ``timeout`` ran out; both lists keep the order of ``refs``."""
    _blocking(worker, "wait")
    items = _as_refs("wait", refs)
    if len(set(items)) != len(items):
        raise ValueError("wait() got the same ref twice")
    if not isinstance(num_returns, int) or not 1 <= num_returns <= max(len(items), 1):
        raise ValueError(f"num_returns must be an int from 1 to len(refs) ({len(items)}), not {num_returns!r}")

    async def first_ready() -> set[ObjectRef]:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        tasks = {_value_task(worker, r): r for r in items}
        ready: set[ObjectRef] = set()
        pending = set(tasks)
        while pending and len(ready) < num_returns:
            left = None if deadline is None else max(0.0, deadline - loop.time())
            done, pending = await asyncio.wait(pending, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            ready.update(tasks[t] for t in done)
            if not done:
                break
        for t, r in tasks.items():  # ready or not, the value is kept (or still fetched) for a later get
            _keep(worker, r, t)
        return ready

    ready = asyncio.run_coroutine_threadsafe(first_ready(), worker.loop).result() if items else set()
    chosen = [r for r in items if r in ready][:num_returns]
    return chosen, [r for r in items if r not in chosen]


def put(worker: Worker, value: Any) -> ObjectRef:
    """Store ``value`` here; a ref owned by this process names it."""
    held = object_value(b"", value)  # before a counter is taken: a value that cannot be pickled takes none
    ctx = worker.submitter.sender()
    with ctx.lock:
        counter = ctx.next_counter(PUT_COUNTER)
    object_id = ids.object_id(ids.task_id(PUT_COUNTER, ctx.sender_id, counter))
    ref = ObjectRef(object_id, worker.address, owned=True, owner_actor=ctx.sender_id)
    held.object_id = object_id
    worker.call_soon(_hold, worker, held)
    return ref


def _hold(worker: Worker, value: pb.ObjectValue) -> None:
    """Keep a put value, owned by this process, while a ref names it (and replays may need it)."""
    worker.objects.expect(value.object_id)
    worker.objects.put(value)
    worker.retention.referenced(value.object_id)
