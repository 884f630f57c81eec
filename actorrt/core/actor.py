"""One actor: its mailbox, and its tasks run one at a time.

A task's reference arguments are resolved before it runs, in mailbox order, so tasks of one
sender run in submission order. Methods run on the node's event loop: plain methods inline (a
millisecond task costs no thread hop), ``async def`` methods as coroutines that may await refs.
A task already run (a re-send) is answered from the actor's ledger; between two tasks the actor
may checkpoint (the ``__checkpoint__`` task, or every N tasks).
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import os
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from actorrt.core import context, interruptions
from actorrt.core.arguments import ArgumentError, MissingArgumentError, resolve_args
from actorrt.core.awaits import Awaits
from actorrt.core.blocking_calls import may_block
from actorrt.core.checkpointer import Checkpointer
from actorrt.core.concurrent_calls import ConcurrentCall, run_concurrently
from actorrt.core.first_calls import FirstCalls
from actorrt.core.held_outputs import HeldOutputs
from actorrt.core.ledger import SenderLedger
from actorrt.core.membership import Membership
from actorrt.core.serialization import error_from_exception, missing_module, object_value, runtime_error, serialize
from actorrt.core.submitter import Submitter
from actorrt.core.task_spec import CALL_METHOD, CHECKPOINT_METHOD, KILL_METHOD, ONCE_METHOD, SenderContext
from actorrt.core.timers import TIMER_METHOD, TIMERS_EXTRA, ActorTimers, TimerTable
from actorrt.exceptions import task_failure
from actorrt.lineage import ids
from actorrt.lineage.application_log import RunningTask
from actorrt.lineage.policies import Policy
from actorrt.lineage.strategy import FaultTolerance
from actorrt.objects.fetches import Fetches
from actorrt.objects.shared import SharedObjects
from actorrt.rpc import checkpoint_pb2, node_pb2
from actorrt.rpc import common_pb2 as pb
from actorrt.util import pickling
from actorrt.util.lease import Lease

log = logging.getLogger(__name__)

# A replay lets the node's other actors run after this many of its tasks (a new task, after each).
REPLAY_YIELD_EVERY = 32
# Recorded tasks whose arguments a replay asks for ahead of running them.
REPLAY_PREFETCH = 32
# What a task cancelled before it started records first in its log.
_CANCELLED = "actorrt: cancelled before it started"
# A method's None result, serialized: a lazily checkpointing actor sends it at once.
NONE_VALUE = serialize(None)
_CANCELLED_ENTRY = pickling.dumps(_CANCELLED)


def _as_metrics(values: Any) -> dict[str, float]:
    return {str(name): float(value) for name, value in values.items()}


def _as_labels(values: Any) -> list[str]:
    return [values] if isinstance(values, str) else [str(value) for value in values]


class ActorServices(Protocol):
    """What an actor needs of the process hosting it (the ``Worker`` provides it)."""

    slot: int
    epoch: int
    address: str
    ft: FaultTolerance
    fetches: Fetches
    awaits: Awaits
    lease: Lease
    membership: Membership
    shared: SharedObjects | None
    submitter: Submitter

    def send_result(self, owner_address: str, value: pb.ObjectValue, task: pb.TaskSpec | None = None) -> None: ...

    def announce_checkpoint(self, done: node_pb2.Checkpointed) -> None: ...

    def keep_standby(self, actor: ActorInstance) -> None: ...

    async def hand_to_standby(self, done: node_pb2.Checkpointed) -> None: ...

    def pending_sent(self, sender: bytes) -> list[checkpoint_pb2.PendingTask]: ...

    def send_again(self, pending: checkpoint_pb2.PendingTask) -> None: ...

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task: ...

    async def off_loop(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` in a thread for methods that block, in the caller's context."""
        ...


@dataclass
class Started:
    """A task given its place in the actor's order, about to run."""

    spec: pb.TaskSpec
    replayed: bool  # it runs as recorded: its order is in the store
    replay_done: bool  # the replay's last task
    keep: bool  # its result may be asked for again: kept in the ledger


class ActorInstance:
    def __init__(self, services: ActorServices, actor_id: bytes, creation: pb.ActorCreation) -> None:
        self.services = services
        self.actor_id = actor_id
        self.creation = creation
        self.class_name = creation.class_name
        self.who = f"{self.class_name}({ids.short(actor_id)})"
        self.nondeterministic = creation.nondeterministic
        self.context = SenderContext(actor_id)
        self.mailbox: asyncio.Queue[pb.TaskSpec] = asyncio.Queue()
        self.cls: type | None = None  # loaded by the constructor task
        self._blocking: dict[str, bool] = {}  # its methods that may block in get: they run in a thread
        self.instance: Any = None
        self.death: pb.RemoteError | None = None
        self.executed = 0
        self.last_executed = b""  # the predecessor of the next task, for AssignTask
        self.last_sender = b""  # its sender: a deterministic actor records where the sender changes
        # An actor sender may await its results again: replayed where lineage is logged, or restored
        # from a global checkpoint that awaited them while this actor stays where it is (the
        # rollback frontier): results are kept until the sender's checkpoint no longer awaits them.
        ft = services.ft
        self.ledger = SenderLedger(actor_id, self.who, senders_replay=ft.logs_lineage or ft.rolls_back,
                                   shared=services.shared, functions_rerun=not ft.rolls_back,
                                   sorts_senders=ft.rolls_back)
        self._marks_acks = ft.rolls_back  # its acknowledgements say so (the rollback frontier)
        self.policy = Policy.from_proto(creation.policy)
        services.ft.hosts(actor_id, self.policy)
        if self.policy.kind == "ephemeral":
            services.submitter.ephemeral.add(actor_id)
        # What it made and may not send yet (a checkpointing policy: core/held_outputs.py).
        self.held = HeldOutputs() if self.policy.holds_outputs else None
        self.checkpointer = Checkpointer(self)
        if ft.rolls_back and not creation.nondeterministic and creation.max_concurrency <= 1:
            # What it takes and calls since its checkpoint is marked: a rollback may do it again.
            self.context.on_call = lambda: self.checkpointer.took_from(b"")
        self.standby: int | None = None  # the slot of its standby (created with one: core/standbys.py)
        self.watermarks: dict[str, tuple[int, int]] = {}  # ONCE_METHOD marks applied, per source
        self.replay: set[bytes] = set()  # tasks queued as recorded (recovery), not as new arrivals
        self.replay_order: list[pb.TaskSpec] = []  # those tasks, in order: their arguments are prefetched
        self.results_unasked: set[bytes] = set()  # of those, tasks whose results nobody can ask for again
        self._prefetched = 0  # how many of them had their arguments asked for
        self.replaying = b""  # the recorded task running again now, if one is
        self.running = b""  # the task running now, if one is (of several at once: the one whose step runs)
        self.calls_running: set[bytes] = set()  # with max_concurrency: the calls under way
        self.replayed = asyncio.Event()  # set once every recorded task ran again
        self.cancelled: set[bytes] = set()  # tasks actorrt.cancel() reached before they started
        self.killed_queued: set[bytes] = set()  # tasks queued ahead of a kill, which skips them
        self.awaiting: RunningTask | None = None  # the live method whose coroutine runs now, which a kill interrupts
        self.timers = ActorTimers(self.timer_table, self._send_firing)
        self.between_tasks = True  # no task is under way (a checkpoint may be taken now)
        self.first: FirstCalls | None = None  # restored to do again what it did (core/first_calls.py)
        self._runner = asyncio.ensure_future(self._run())
        self._runner.add_done_callback(self._runner_ended)
        if self.checkpointer.every_s:
            self._idle = asyncio.ensure_future(self.checkpointer.when_idle(self.checkpointer.every_s))

    def stop(self) -> None:
        self.timers.stop()
        self._runner.cancel()
        if self.checkpointer.every_s:
            self._idle.cancel()

    def published(self) -> dict[str, Any]:
        """What the actor's instance publishes for monitoring: ``__actorrt_metrics__()`` (name to
        number), ``__actorrt_label__()`` (a name for people) and ``__actorrt_inputs__()`` (the
        labels, up to ``#``, of what feeds it), if its class defines them. A hook that fails
        publishes nothing; it never fails the stats."""
        out: dict[str, Any] = {}
        hooks = (("__actorrt_metrics__", "metrics", _as_metrics), ("__actorrt_label__", "label", str),
                 ("__actorrt_inputs__", "inputs", _as_labels))
        for hook, field_name, form in hooks:
            fn = getattr(self.instance, hook, None)
            if fn is None or self.death is not None:
                continue
            try:
                out[field_name] = form(fn())
            except Exception as exc:  # noqa: BLE001 - user code; monitoring must not break on it
                log.debug("actor %s: %s() failed: %r", self.who, hook, exc)
        return out

    def timer_table(self) -> TimerTable:
        """This actor's timers (part of its state)."""
        return self.context.extras.setdefault(TIMERS_EXTRA, TimerTable())

    def waiting(self) -> list[pb.TaskSpec]:
        """The tasks queued in the mailbox, in order."""
        return list(self.mailbox._queue)  # asyncio.Queue keeps them in a deque; there is no public view

    def die(self, kind: int, message: str) -> None:
        """From now on every task of this actor fails with ``message``."""
        self.death = runtime_error(kind, message, self.actor_id)
        self.timers.stop()

    def tell_stopped(self, why: str) -> None:
        """Call the instance's ``__actorrt_stopped__(why)`` (a plain method), if its class defines
        one: the last word of an actor the runtime stopped (its replay diverged, or lacks an
        argument that is gone), e.g. to tell a monitor at once rather than when someone next calls
        it. It runs outside any task, so what it submits comes from this process, not from the
        actor (whose state is not the one its past produced); a later replay that stops again
        calls it again."""
        hook = getattr(self.instance, "__actorrt_stopped__", None)
        if hook is None:
            return

        def call() -> None:
            try:
                hook(why)
            except Exception as exc:  # noqa: BLE001 - user code; the actor is stopped either way
                log.warning("actor %s: __actorrt_stopped__ failed: %r", self.who, exc)

        contextvars.Context().run(call)  # no current sender: not a task of the stopped actor

    def _runner_ended(self, runner: asyncio.Task) -> None:
        if runner.cancelled():
            return
        # Only a runtime bug gets here (method errors become results); fail loudly, not silently.
        log.error("actor %s stopped", ids.short(self.actor_id), exc_info=runner.exception())
        self.die(pb.ACTOR_DIED, f"actor {ids.short(self.actor_id)} stopped: {runner.exception()!r}")
        while not self.mailbox.empty():
            spec = self.mailbox.get_nowait()
            self.services.send_result(spec.owner_address, pb.ObjectValue(object_id=ids.object_id(spec.task_id),
                                                                       error=self.death))

    async def _run(self) -> None:
        if self.creation.max_concurrency > 1:
            await run_concurrently(self, self.creation.max_concurrency)
        while True:
            spec = await self.mailbox.get()
            self.between_tasks = False
            if not await self.ready(spec):
                self.between_tasks = True
                continue
            started = await self.start(spec)
            self.running = started.spec.task_id
            value = await self._execute(started.spec, started.keep)  # (no extra coroutine on the hot path)
            self.running = b""
            await self.finish(started, value)
            self.between_tasks = True
            if not self.mailbox.empty() and (not self.replaying or self.executed % REPLAY_YIELD_EVERY == 0):
                await asyncio.sleep(0)  # fairness: a backlog here must not starve the node's other actors

    async def ready(self, spec: pb.TaskSpec) -> bool:
        """Whether to run ``spec`` (a re-sent task is answered from the ledger instead), once the
        stash has room and the node holds its lease."""
        if self.first is not None and self.first.waits(spec, self.ledger, self.mailbox):
            return False
        if self.ledger.is_resent(spec):
            self.answer_resent(spec)
            return False
        if self.services.ft.over_limit and self.held is None:  # back-pressure: its tasks would grow the stash
            # (A checkpointing actor's own tasks are in the stash until its checkpoint, which
            # a wait here would never reach: it checkpoints after this task instead.)
            await self.services.ft.wait_below_limit()
        if not self.services.lease.valid():  # a node that hung may have been replaced meanwhile
            await self.services.lease.held()
            if self.services.ft.rolls_back and self.services.membership.incarnation_gone(spec.owner_address):
                self.services.fetches.drop_unused(spec)  # sent by a node process that went back while
                return False  # this one was frozen (core/freezing.py): its sender sends again what it does
        return True

    def answer_resent(self, spec: pb.TaskSpec) -> None:
        """``spec`` ran here before: its kept result, or why there is none."""
        self.services.fetches.drop_unused(spec)
        self.services.send_result(spec.owner_address, self.ledger.answer(spec))

    async def start(self, spec: pb.TaskSpec) -> Started:
        """``spec``'s place in the actor's order: the replay's, or recorded now (AssignTask)."""
        ft = self.services.ft
        replayed = spec.task_id in self.replay
        if replayed:
            self.replay.discard(spec.task_id)  # runs as recorded: its order is in the store
            replay_done = not self.replay
            self.replaying = spec.task_id
            self._prefetch_replay(len(self.replay_order) - len(self.replay))
        else:
            replay_done = False
            self.replaying = b""
            record_order = self.nondeterministic or spec.sender != self.last_sender
            spec = await ft.on_assign(spec, self.last_executed, record_order)  # AssignTask
        if spec.method == "__init__":
            await ft.register_actor(self.services.slot, self.actor_id)  # a restarted slot finds it
            self.services.keep_standby(self)
        self.last_executed, self.last_sender = spec.task_id, spec.sender
        self.ledger.ran(spec)
        if self.context.on_call is not None:
            self.checkpointer.took_from(spec.sender)
        return Started(spec, replayed, replay_done, keep=spec.task_id not in self.results_unasked)

    async def finish(self, started: Started, value: pb.ObjectValue, checkpoint: bool = True,
                     executed: bool = True, replay_done: bool = True) -> None:
        """``started`` ran to ``value``: told to the lineage (unless ``executed`` is False: the
        caller tells it), kept, checkpointed after if due (and ``checkpoint``), sent to its owner,
        and the replay over if it was its last task (and ``replay_done``)."""
        spec = started.spec
        if executed:
            self.services.ft.on_executed(spec, started.replayed)
        self.executed += 1
        self.checkpointer.since += 1
        # A replayed task's owner has its result already, or re-sends the task, which is then
        # answered from the ledger: sending it again would only load the streams.
        send = not started.replayed
        if send and self.held is not None:
            send = await self._send_or_hold(spec, value)
        elif send and self._marks_acks and self._acknowledges(spec, value):
            value.keep_call = True  # its caller depends on nothing in it (the rollback frontier)
        if started.keep:
            self.ledger.keep(spec, value)
        if checkpoint and self.checkpointer.due(spec):
            await self.checkpoint_now()
        if send:
            self.services.send_result(spec.owner_address, value, spec)
        if started.replay_done and replay_done:
            self.replayed.set()
            self.timers.resume()
        if self.first is not None and self.first.taken(self.ledger, self.mailbox):
            self.first = None

    async def checkpoint_now(self) -> None:
        await self.services.lease.held()
        await self.checkpointer.take_or_log()

    async def _send_or_hold(self, spec: pb.TaskSpec, value: pb.ObjectValue) -> bool:
        """Under a checkpointing policy: whether ``spec``'s result goes now.

        An eager actor's results wait for the checkpoint that covers their tasks. A lazy actor's
        acknowledgement goes at once: a None result of a method its class names in
        ``__actorrt_acks__`` (one whose result says only that the call ran, whatever the order of
        calls), whose caller keeps the call until a checkpoint covers it (``keep_call``), to send
        it again after a failure. Any other result first writes the lineage of the tasks since the
        checkpoint (an escape): a replay reproduces it. So does the task that killed the actor,
        which no checkpoint follows. A call's result to the actor itself (a timer's, a source's
        next pull) goes at once."""
        if self.death is not None:
            if len(self.held):
                await self.escape(spec.task_id)
            return True
        if spec.method == CHECKPOINT_METHOD or spec.sender == self.actor_id:
            return True  # durable by now; or its own call's result, which goes back with it
        if self.policy.kind == "eager":
            self.held.hold_result(lambda: self.services.send_result(spec.owner_address, value, spec))
            return False
        if self._acknowledges(spec, value):
            value.keep_call = True
            return True
        await self.escape(spec.task_id)
        return True

    def _acknowledges(self, spec: pb.TaskSpec, value: pb.ObjectValue) -> bool:
        """Whether ``value`` only says that ``spec`` ran: a None result of a method the actor's
        class names in ``__actorrt_acks__``."""
        return (value.HasField("value") and value.value == NONE_VALUE
                and spec.method in getattr(self.instance, "__actorrt_acks__", ()))

    async def escape(self, task_id: bytes) -> None:
        """What task ``task_id`` made must leave before the next checkpoint (it waits for a call
        it made, or returns a value): write the lineage of the tasks since the checkpoint, so that
        a replay reproduces what they made, then send everything held."""
        await self.services.ft.commit_lineage(task_id)
        self.held.release()

    def _skipped(self, spec: pb.TaskSpec, replayed: bool) -> pb.RemoteError | None:
        """Why ``spec`` does not run, if it was cancelled or queued ahead of a kill: decided when
        it comes up, and then recorded in its log (a new version, like ``actorrt.record``), so
        that a replay decides the same."""
        killed, cancelled = spec.task_id in self.killed_queued, spec.task_id in self.cancelled
        self.killed_queued.discard(spec.task_id)  # (a replay decides from its log, not from these)
        self.cancelled.discard(spec.task_id)
        if spec.application_log or replayed:  # a replay decides as the past did
            why = spec.application_log[0] if spec.application_log else b""
            why = _CANCELLED if why == _CANCELLED_ENTRY else interruptions.KILLED if why == interruptions.KILLED_ENTRY \
                else None
        elif cancelled:
            why = context.record(lambda: _CANCELLED, self.services.ft.on_record)
        elif killed:
            why = context.record(lambda: interruptions.KILLED, self.services.ft.on_record)
        else:
            return None
        if why == _CANCELLED:
            return runtime_error(pb.CANCELLED, f"task {spec.method} of actor {self.who} was cancelled before it "
                                               f"started", self.actor_id)
        return interruptions.killed_error(self.who, self.actor_id, False) if why == interruptions.KILLED else None

    def kill_notice(self, kill_task: bytes) -> None:
        """``actorrt.kill`` sent ``kill_task``: the tasks queued ahead of it are skipped, and the
        method awaited now is interrupted (``interruptions.py``)."""
        queued = [spec.task_id for spec in self.waiting()]
        if self.death is not None or kill_task not in queued:
            return  # it ran already (or is not here yet)
        self.killed_queued.update(queued[:queued.index(kill_task)])
        task = self.awaiting
        if task is None or task.replayed or task.interrupted or asyncio.current_task() is self._runner:
            return  # (a method that kills its own actor is not interrupted: it runs to its end)
        try:
            interruptions.interrupt(task, self._runner, self.services.ft.on_record)
        except ValueError as exc:  # its log is full: the kill waits for the method's end
            log.warning("actor %s: the kill does not interrupt %s: %s", self.who, task.spec.method, exc)

    async def _await_method(self, awaitable: Any) -> Any:
        """Await a method's coroutine, which a kill may interrupt (or interrupted, before a failure)."""
        task = context.running_task.get()
        if task.replayed and (after := interruptions.recorded_interruption(task.spec)) is not None:
            await interruptions.replay_interrupted(task, awaitable, after)
        self.awaiting = task
        try:
            value = await awaitable
        except BaseException:
            if not task.interrupted:
                raise
            value = None
        finally:
            self.awaiting = None
        if task.interrupted:
            if asyncio.current_task().uncancel() > 0:
                raise asyncio.CancelledError  # the actor is being stopped too
            raise interruptions.Interrupted
        return value

    def _prefetch_replay(self, position: int) -> None:
        """Ask for the arguments of the next recorded tasks now, so that a replay does not wait
        a round trip per task (a window, so that it does not hold them all in memory at once)."""
        end = min(len(self.replay_order), position + REPLAY_PREFETCH)
        while self._prefetched < end:
            spec = self.replay_order[self._prefetched]
            for arg in spec.args:
                if arg.HasField("ref"):
                    self.services.fetches.prefetch(arg.ref, (spec.receiver, spec.sender, spec.task_counter))
            self._prefetched += 1

    async def execute(self, started: Started, call: ConcurrentCall | None = None) -> pb.ObjectValue:
        """Run ``started``; its result. ``call``: one of several running at once."""
        return await self._execute(started.spec, started.keep, call)

    def stop_diverged(self, message: str) -> None:
        """Stop the actor: its replay did not do what the run before the failure did."""
        self.die(pb.ACTOR_DIED, f"actor {self.who} was stopped: {message}")
        log.error("%s", self.death.message)
        self.tell_stopped(self.death.message)

    async def _execute(self, spec: pb.TaskSpec, keep: bool = True, call: ConcurrentCall | None = None,
                       ) -> pb.ObjectValue:
        """Run ``spec``; its result (not serialized unless ``keep``: a replayed task whose result
        nobody can ask for again). ``call``: one of several running at once (``max_concurrency``)."""
        object_id = ids.object_id(spec.task_id)
        if self.death is not None:
            self.services.fetches.drop_unused(spec)
            return pb.ObjectValue(object_id=object_id, error=self.death)
        resolved: list[bytes] = []
        replayed = call.replayed if call is not None else self.replaying == spec.task_id
        sender = call.sender if call is not None else self.context
        token = context.current_sender.set(sender)
        log_token = context.running_task.set(RunningTask(spec, replayed=replayed))
        sender.current_task = spec.task_id
        sender.running = f"{self.who}.{spec.method}"
        try:
            skipped = self._skipped(spec, replayed)
            if skipped is not None:
                self.services.fetches.drop_unused(spec)
                return pb.ObjectValue(object_id=object_id, error=skipped)
            args, kwargs = await resolve_args(self.services.fetches, self.services.awaits, sender, spec, resolved)
            if call is not None:  # its steps take their turns in the actor's recorded order
                result = await call.run(lambda: self._call(spec, args, kwargs))
            elif self._blocks(spec):  # it may wait in get(): off the loop, which serves the node meanwhile
                context.running_task.get().loop = asyncio.get_running_loop()
                result = await self.services.off_loop(self._call, spec, args, kwargs)
            else:
                result = self._call(spec, args, kwargs)
                if inspect.isawaitable(result):
                    result = await self._await_method(result)
            if inspect.isawaitable(result):
                result = await result
            return object_value(object_id, result) if keep else pb.ObjectValue(
                object_id=object_id)
        except MissingArgumentError as exc:
            if replayed:
                # It ran with this argument before the failure: running it without would diverge.
                self.die(pb.ACTOR_DIED, f"actor {self.who} was stopped: the replay of its task #{spec.task_counter} "
                                        f"from {ids.short(spec.sender)} ({spec.method}) needs object "
                                        f"{ids.short(exc.object_id)}, which is gone: {exc.error.message}")
                log.error("%s", self.death.message)
                self.tell_stopped(self.death.message)
                return pb.ObjectValue(object_id=object_id, error=self.death)
            return pb.ObjectValue(object_id=object_id, error=exc.error)
        except ArgumentError as exc:
            return pb.ObjectValue(object_id=object_id, error=exc.error)
        except interruptions.Interrupted:
            return pb.ObjectValue(object_id=object_id, error=interruptions.killed_error(self.who, self.actor_id, True))
        except asyncio.CancelledError as exc:
            if asyncio.current_task().cancelling():
                raise  # the actor itself is being stopped
            error = error_from_exception(exc, self.actor_id, self._where(spec))
            return pb.ObjectValue(object_id=object_id, error=error)
        except BaseException as exc:  # noqa: BLE001 - any user error, SystemExit included, goes back
            error = error_from_exception(exc, self.actor_id, self._where(spec))
            log.warning("%s\n%s", task_failure(error.where, error.type_name, error.message), error.traceback)
            if spec.method == "__init__":
                # Every call raises this: with the constructor's traceback, the one report of it.
                why = (f"its constructor raised {error.type_name}: {error.message}\n\nRemote traceback:\n"
                       f"{error.traceback}" if self.cls is not None
                       else f"its class could not be loaded on node {self.services.slot}: {error.message}")
                self.die(pb.ACTOR_DIED, f"actor {self.who} died: {why}")
            return pb.ObjectValue(object_id=object_id, error=error)
        finally:
            context.current_sender.reset(token)
            context.running_task.reset(log_token)
            for oid in resolved:
                self.services.fetches.unborrow(oid)

    def _where(self, spec: pb.TaskSpec) -> str:
        return f"{self.who}.{spec.method} on node {self.services.slot} (pid {os.getpid()})"

    def _call(self, spec: pb.TaskSpec, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if spec.method == "__init__":
            self.instance = self._load_class(spec)(*args, **kwargs)
            return None
        if spec.method == CHECKPOINT_METHOD:
            return self.checkpointer.take(spec)
        if spec.method == ONCE_METHOD:
            return self._once(*args, **kwargs)
        if spec.method == CALL_METHOD:
            fn, *rest = args
            return fn(self.instance, *rest, **kwargs)
        if spec.method == TIMER_METHOD:
            return self._fire(*args)
        if spec.method == KILL_METHOD:  # a logged task like any other: a replay kills it again here
            self.die(pb.ACTOR_DIED, f"actor {self.who} was killed with actorrt.kill()")
            self.instance = None  # its state goes now (a released actor's memory, say)
            return None
        return self._method(spec.method)(*args, **kwargs)

    def _send_firing(self, timer_id: int, n: int) -> None:
        """Send this actor firing ``n`` of ``timer_id``: a task from the timer's own sender, whose
        ID derives from (actor, timer, n) alone, so sending it again after a failure is harmless."""
        entry = self.timer_table().entries.get(timer_id)
        if entry is None or self.death is not None:
            return
        timer = SenderContext(ids.timer_sender(self.actor_id, timer_id), {self.actor_id: n - 1},
                              current_task=entry.registered_by)
        token = context.current_sender.set(timer)
        # Not a send of the task that armed the timer (its context came with the loop's callback).
        log_token = context.running_task.set(None)
        try:
            self.services.submitter.submit_task(self.actor_id, self.services.slot, TIMER_METHOD, (timer_id, n), {})
        finally:
            context.running_task.reset(log_token)
            context.current_sender.reset(token)

    def _fire(self, timer_id: int, n: int) -> Any:
        """Firing ``n`` of ``timer_id``: the timer's method, unless the timer was cancelled (or this
        firing ran already); a periodic timer is armed for its next firing."""
        table = self.timer_table()
        entry = table.take_firing(timer_id, n, lambda: context.record(time.time, self.services.ft.on_record))
        if entry is None:
            return None
        if timer_id in table.entries:
            self.timers.arm(timer_id)
        return self._method(entry.method)(*entry.args, **entry.kwargs)

    def _blocks(self, spec: pb.TaskSpec) -> bool:
        """Whether ``spec``'s method (a plain one, or the constructor) may block in
        ``actorrt.get`` or ``wait`` (``core/blocking_calls.py``)."""
        if spec.method == "__init__":
            return may_block(self._load_class(spec), "__init__")
        blocks = self._blocking.get(spec.method)
        if blocks is None:
            blocks = self._blocking[spec.method] = (not spec.method.startswith("_") and self.instance is not None
                                                    and may_block(type(self.instance), spec.method))
        return blocks

    def _load_class(self, spec: pb.TaskSpec) -> type:
        if self.cls is None:
            try:
                self.cls = pickling.loads(spec.actor_creation.class_blob)
            except ModuleNotFoundError as exc:
                raise missing_module(exc, f"class {self.class_name}") from None
        return self.cls

    def _method(self, name: str) -> Any:
        method = getattr(self.instance, name, None) if not name.startswith("_") else None
        if method is None or not callable(method):
            raise ArgumentError(runtime_error(pb.NO_SUCH_METHOD, f"{self.class_name} has no method {name!r}",
                                               self.actor_id))
        return method

    def _once(self, source: str, batch: int, seq: int, method: str, /, *args: Any, **kwargs: Any) -> Any:
        """``method(*args)`` unless this actor applied mark ``(batch, seq)`` of ``source`` already."""
        if self.watermarks.get(source, (-1, -1)) >= (batch, seq):
            return None  # a replayed micro-batch: applied before
        result = self._method(method)(*args, **kwargs)
        if not inspect.isawaitable(result):
            self.watermarks[source] = (batch, seq)
            return result

        async def applied() -> Any:  # the mark counts once the call succeeded: a failed one comes again
            value = await result
            self.watermarks[source] = (batch, seq)
            return value

        return applied()
