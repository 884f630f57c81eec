"""The actors a node process hosts: one mailbox and one task at a time per actor.

A task's reference arguments are resolved before it runs, in mailbox order, so tasks of one
sender run in submission order. Methods run on the node's event loop: plain methods inline (a
millisecond task costs no thread hop), ``async def`` methods as coroutines that may await refs.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import cloudpickle

from actorrt import ids
from actorrt.rpc import common_pb2 as pb
from actorrt.rpc import node_pb2
from actorrt.serialization import deserialize, error_from_exception, runtime_error, serialize
from actorrt.task_spec import SenderContext
from actorrt.worker import current_sender

if TYPE_CHECKING:
    from actorrt.worker import Worker

log = logging.getLogger(__name__)

# A task can reach a node before the creation of its actor when it comes over another stream
# (the handle travelled faster than the creation task); it waits this long for the actor.
UNKNOWN_ACTOR_GRACE_S = 2.0
# Results kept per sender to answer a re-sent task (a sender that was itself replayed).
RESULTS_KEPT_PER_SENDER = 16


class _ArgumentError(Exception):
    """A reference argument resolved to an error; the task fails with that error."""

    def __init__(self, error: pb.RemoteError) -> None:
        self.error = error


class ActorInstance:
    def __init__(self, worker: Worker, actor_id: bytes, creation: pb.ActorCreation) -> None:
        self.worker = worker
        self.actor_id = actor_id
        self.class_name = creation.class_name
        self.nondeterministic = creation.nondeterministic
        self.context = SenderContext(actor_id)
        self.mailbox: asyncio.Queue[pb.TaskSpec] = asyncio.Queue()
        self.instance: Any = None
        self.death: pb.RemoteError | None = None
        self.executed = 0
        self.last_executed = b""  # the predecessor of the next task, for AssignTask
        # Deduplication: tasks of one sender run in counter order, so a task whose counter is not
        # above the last one run from its sender is a re-send; it gets the kept result, if any.
        self.last_counter: dict[bytes, int] = {}
        self.results: dict[bytes, OrderedDict[int, pb.ObjectValue]] = {}
        self.replay: set[bytes] = set()  # tasks queued as recorded (recovery), not as new arrivals
        self.replayed = asyncio.Event()  # set once every recorded task ran again
        self._runner = asyncio.ensure_future(self._run())
        self._runner.add_done_callback(self._runner_ended)

    def stop(self) -> None:
        self._runner.cancel()

    def _runner_ended(self, runner: asyncio.Task) -> None:
        if runner.cancelled():
            return
        # Only a runtime bug gets here (method errors become results); fail loudly, not silently.
        log.error("actor %s stopped", ids.short(self.actor_id), exc_info=runner.exception())
        self.death = runtime_error(pb.ACTOR_DIED, f"actor {ids.short(self.actor_id)} stopped: {runner.exception()!r}")
        while not self.mailbox.empty():
            spec = self.mailbox.get_nowait()
            self.worker.send_result(spec.owner_address, pb.ObjectValue(object_id=ids.object_id(spec.task_id),
                                                                     error=self.death))

    async def _run(self) -> None:
        ft = self.worker.ft
        while True:
            spec = await self.mailbox.get()
            if spec.task_counter <= self.last_counter.get(spec.sender, 0):
                self._answer_duplicate(spec)
                continue
            if ft.over_limit:  # back-pressure: the tasks this one submits would grow the stash
                await ft.wait_below_limit()
            if spec.task_id in self.replay:
                self.replay.discard(spec.task_id)  # runs as recorded: its order is in the store
                replay_done = not self.replay
            else:
                replay_done = False
                spec = await ft.on_assign(spec, self.last_executed, self.nondeterministic)  # AssignTask
            if spec.method == "__init__":
                await ft.register_actor(self.worker.slot, self.actor_id)  # a restarted slot finds it
            self.last_executed = spec.task_id
            self.last_counter[spec.sender] = spec.task_counter
            value = await self._execute(spec)
            self.executed += 1
            self._keep(spec, value)
            self.worker.send_result(spec.owner_address, value, spec)
            if replay_done:
                self.replayed.set()
            if not self.mailbox.empty():
                await asyncio.sleep(0)  # fairness: a backlog here must not starve the node's other actors

    def _keep(self, spec: pb.TaskSpec, value: pb.ObjectValue) -> None:
        kept = self.results.setdefault(spec.sender, OrderedDict())
        kept[spec.task_counter] = value
        if len(kept) > RESULTS_KEPT_PER_SENDER:
            kept.popitem(last=False)

    def _answer_duplicate(self, spec: pb.TaskSpec) -> None:
        value = self.results.get(spec.sender, {}).get(spec.task_counter)
        if value is not None:
            self.worker.send_result(spec.owner_address, value)

    async def _execute(self, spec: pb.TaskSpec) -> pb.ObjectValue:
        object_id = ids.object_id(spec.task_id)
        if self.death is not None:
            return pb.ObjectValue(object_id=object_id, error=self.death)
        resolved: list[bytes] = []
        token = current_sender.set(self.context)
        self.context.current_task = spec.task_id
        try:
            args, kwargs = await self._resolve_args(spec.args, resolved)
            result = self._call(spec, args, kwargs)
            if inspect.isawaitable(result):
                result = await result
            return pb.ObjectValue(object_id=object_id, value=serialize(result))
        except _ArgumentError as exc:
            return pb.ObjectValue(object_id=object_id, error=exc.error)
        except asyncio.CancelledError as exc:
            if asyncio.current_task().cancelling():
                raise  # the actor itself is being stopped
            return pb.ObjectValue(object_id=object_id, error=error_from_exception(exc, self.actor_id))
        except BaseException as exc:  # noqa: BLE001 - any user error, SystemExit included, goes back
            error = error_from_exception(exc, self.actor_id)
            if spec.method == "__init__":
                who = f"{self.class_name}({ids.short(self.actor_id)})"
                msg = f"actor {who} died: its constructor raised {error.type_name}: {error.message}"
                self.death = runtime_error(pb.ACTOR_DIED, msg, self.actor_id)
            return pb.ObjectValue(object_id=object_id, error=error)
        finally:
            current_sender.reset(token)
            for oid in resolved:
                self.worker.unborrow(oid)

    def _call(self, spec: pb.TaskSpec, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if spec.method == "__init__":
            cls = cloudpickle.loads(spec.actor_creation.class_blob)
            self.instance = cls(*args, **kwargs)
            return None
        method = getattr(self.instance, spec.method, None) if not spec.method.startswith("_") else None
        if method is None or not callable(method):
            msg = f"{self.class_name} has no method {spec.method!r}"
            raise _ArgumentError(runtime_error(pb.NO_SUCH_METHOD, msg, self.actor_id))
        return method(*args, **kwargs)

    async def _resolve_args(self, wire: Any, resolved: list[bytes]) -> tuple[list[Any], dict[str, Any]]:
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for arg in wire:
            if arg.WhichOneof("kind") == "ref":
                resolved.append(arg.ref.object_id)  # before awaiting: unborrowed even if cancelled
                value = await self.worker.resolve(arg.ref)
                if value.WhichOneof("kind") == "error":
                    raise _ArgumentError(value.error)
                item = deserialize(value.value)
            else:
                item = deserialize(arg.value)
            if arg.keyword:
                kwargs[arg.keyword] = item
            else:
                args.append(item)
        return args, kwargs


class ActorHost:
    """The actors of this node, by actor ID."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.actors: dict[bytes, ActorInstance] = {}
        self._early: dict[bytes, list[pb.TaskSpec]] = {}  # tasks that beat their actor's creation
        self._held: list[pb.TaskSpec] | None = None  # arrivals while recovering

    def hold(self) -> None:
        """Recovering: keep arriving tasks until ``release`` (the replays must queue first)."""
        self._held = []

    def recover(self, actor_id: bytes, order: list[pb.TaskSpec]) -> ActorInstance:
        """Rebuild ``actor_id`` by re-executing ``order`` (constructor first) as recorded."""
        actor = self.actors[actor_id] = ActorInstance(self.worker, actor_id, order[0].actor_creation)
        for spec in order:
            actor.replay.add(spec.task_id)
            actor.mailbox.put_nowait(spec)
        return actor

    def release(self) -> None:
        held, self._held = self._held or [], None
        for spec in held:
            self.assign(spec)

    def assign(self, spec: pb.TaskSpec) -> None:
        """Queue a task for its actor (AssignTask in the lineage stash)."""
        if self._held is not None:
            self._held.append(spec)
            return
        actor = self.actors.get(spec.receiver)
        if actor is None and spec.HasField("actor_creation"):
            actor = self.actors[spec.receiver] = ActorInstance(self.worker, spec.receiver, spec.actor_creation)
            actor.mailbox.put_nowait(spec)
            for early in self._early.pop(spec.receiver, []):
                actor.mailbox.put_nowait(early)
            return
        if actor is None:
            waiting = self._early.setdefault(spec.receiver, [])
            if not waiting:
                asyncio.get_running_loop().call_later(UNKNOWN_ACTOR_GRACE_S, self._expire, spec.receiver)
            waiting.append(spec)
            return
        actor.mailbox.put_nowait(spec)

    def _expire(self, actor_id: bytes) -> None:
        for spec in self._early.pop(actor_id, []):
            msg = f"no actor {ids.short(actor_id)} on node {self.worker.address}"
            error = runtime_error(pb.UNKNOWN_ACTOR, msg, actor_id)
            value = pb.ObjectValue(object_id=ids.object_id(spec.task_id), error=error)
            self.worker.send_result(spec.owner_address, value)

    def stats(self) -> list[node_pb2.ActorStats]:
        return [
            node_pb2.ActorStats(
                actor_id=a.actor_id, class_name=a.class_name, queued=a.mailbox.qsize(),
                executed=a.executed, dead=a.death is not None,
            )
            for a in self.actors.values()
        ]

    def stop(self) -> None:
        for actor in self.actors.values():
            actor.stop()

