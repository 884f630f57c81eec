"""The actors a node process hosts: one mailbox and one task at a time per actor.

A task's reference arguments are resolved before it runs, in mailbox order, so tasks of one
sender run in submission order. Methods run on the node's event loop: plain methods inline (a
millisecond task costs no thread hop), ``async def`` methods as coroutines that may await refs.

Between two tasks an actor may checkpoint (the ``__checkpoint__`` task, or every N tasks): its
state, what it has run from each sender and its own task counters go to a file, the store points
at the file, and the lineage the previous checkpoint covered is collected.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import cloudpickle

from actorrt import checkpoints, ids
from actorrt.application_log import RunningTask, running_task
from actorrt.checkpoints import CHECKPOINT_METHOD, ONCE_METHOD
from actorrt.exceptions import ClusterError
from actorrt.rpc import checkpoint_pb2, node_pb2
from actorrt.rpc import common_pb2 as pb
from actorrt.serialization import deserialize, error_from_exception, runtime_error, serialize
from actorrt.task_spec import SenderContext, call_digest
from actorrt.worker import current_sender

if TYPE_CHECKING:
    from actorrt.worker import Worker

log = logging.getLogger(__name__)

# A task can reach a node before the creation of its actor when it comes over another stream
# (the handle travelled faster than the creation task); it waits this long for the actor.
UNKNOWN_ACTOR_GRACE_S = 2.0
# Results kept per sender to answer a re-sent task (a sender that was itself replayed, and may
# await each result again): the last 16 at least, and more while they fit in 256 KB, so the small
# results most awaited calls return stay answerable for thousands of tasks.
RESULTS_KEPT_PER_SENDER = 16
RESULT_BYTES_KEPT_PER_SENDER = 256 * 1024
# Digests of the calls run per sender (8 bytes each), to tell a faithful re-send from a diverged one.
CALLS_KEPT_PER_SENDER = 1024


class _ArgumentError(Exception):
    """A reference argument resolved to an error; the task fails with that error."""

    def __init__(self, error: pb.RemoteError) -> None:
        self.error = error


class ActorInstance:
    def __init__(self, worker: Worker, actor_id: bytes, creation: pb.ActorCreation) -> None:
        self.worker = worker
        self.actor_id = actor_id
        self.creation = creation
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
        self._kept_bytes: dict[bytes, int] = {}  # per sender, of ``results``
        self.calls: dict[bytes, OrderedDict[int, bytes]] = {}  # per sender: counter -> call_digest
        self.replay: set[bytes] = set()  # tasks queued as recorded (recovery), not as new arrivals
        self.replaying = b""  # the recorded task running again now, if one is
        self.replayed = asyncio.Event()  # set once every recorded task ran again
        # Checkpoints: the last one's number, the per-sender counters it covers (``cut``), and how
        # far the store's copy of this actor's tasks has been collected.
        self.watermarks: dict[str, tuple[int, int]] = {}  # ONCE_METHOD marks applied, per source
        self.checkpoint_seq = 0
        self.since_checkpoint = 0
        self.cut: dict[bytes, int] = {}
        self.collected: dict[bytes, int] = {}
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
                self.replaying = spec.task_id
            else:
                replay_done = False
                self.replaying = b""
                spec = await ft.on_assign(spec, self.last_executed, self.nondeterministic)  # AssignTask
            if spec.method == "__init__":
                await ft.register_actor(self.worker.slot, self.actor_id)  # a restarted slot finds it
            self.last_executed = spec.task_id
            self.last_counter[spec.sender] = spec.task_counter
            if ft.flusher is not None:  # senders are replayed only where lineage is logged
                self._remember_call(spec)
            value = await self._execute(spec)
            self.executed += 1
            self.since_checkpoint += 1
            self._keep(spec, value)
            every = self.creation.checkpoint_every
            if every and self.since_checkpoint >= every and self.death is None and spec.method != CHECKPOINT_METHOD:
                await self._checkpoint_or_log()
            self.worker.send_result(spec.owner_address, value, spec)
            if replay_done:
                self.replayed.set()
            if not self.mailbox.empty():
                await asyncio.sleep(0)  # fairness: a backlog here must not starve the node's other actors

    def _keep(self, spec: pb.TaskSpec, value: pb.ObjectValue) -> None:
        kept = self.results.setdefault(spec.sender, OrderedDict())
        replaced = kept.pop(spec.task_counter, None)
        kept[spec.task_counter] = value
        size = self._kept_bytes.get(spec.sender, 0) + value.ByteSize() - (replaced.ByteSize() if replaced else 0)
        while len(kept) > RESULTS_KEPT_PER_SENDER and size > RESULT_BYTES_KEPT_PER_SENDER:
            size -= kept.popitem(last=False)[1].ByteSize()
        self._kept_bytes[spec.sender] = size

    def _remember_call(self, spec: pb.TaskSpec) -> None:
        calls = self.calls.setdefault(spec.sender, OrderedDict())
        calls[spec.task_counter] = call_digest(spec)
        if len(calls) > CALLS_KEPT_PER_SENDER:
            calls.popitem(last=False)

    def _answer_duplicate(self, spec: pb.TaskSpec) -> None:
        """A task this actor ran already, sent again (its sender is replaying, or was cut off)."""
        ran = self.calls.get(spec.sender, {}).get(spec.task_counter)
        if ran is not None and ran != call_digest(spec):
            msg = (f"the replay of {ids.short(spec.sender)} diverged: its task #{spec.task_counter} to "
                   f"{self.class_name}({ids.short(self.actor_id)}) came again as {spec.method}() with other "
                   f"arguments than the call that ran. It depends on something its lineage does not record: "
                   f"read clocks, random draws and outside data through actorrt.record() (or more than "
                   f"max_forwards processes failed at once)")
            log.error("%s", msg)
            error = runtime_error(pb.REPLAY_DIVERGED, msg, self.actor_id)
            self.worker.send_result(spec.owner_address, pb.ObjectValue(object_id=ids.object_id(spec.task_id),
                                                                     error=error))
            return
        value = self.results.get(spec.sender, {}).get(spec.task_counter)
        if value is None:  # an answer nonetheless: a replay that awaits it must not wait forever
            msg = (f"{self.class_name}({ids.short(self.actor_id)}) ran task #{spec.task_counter} from "
                   f"{ids.short(spec.sender)} but no longer keeps its result (it keeps the last "
                   f"{RESULTS_KEPT_PER_SENDER} per sender, more while they fit in {RESULT_BYTES_KEPT_PER_SENDER} "
                   f"bytes); checkpoint the sender more often (checkpoint_every=N) so its replays start later")
            value = pb.ObjectValue(object_id=ids.object_id(spec.task_id), error=runtime_error(pb.RESULT_NOT_KEPT, msg))
        self.worker.send_result(spec.owner_address, value)

    async def _execute(self, spec: pb.TaskSpec) -> pb.ObjectValue:
        object_id = ids.object_id(spec.task_id)
        if self.death is not None:
            return pb.ObjectValue(object_id=object_id, error=self.death)
        resolved: list[bytes] = []
        token = current_sender.set(self.context)
        log_token = running_task.set(RunningTask(spec))
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
            running_task.reset(log_token)
            for oid in resolved:
                self.worker.unborrow(oid)

    def _call(self, spec: pb.TaskSpec, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if spec.method == "__init__":
            cls = cloudpickle.loads(spec.actor_creation.class_blob)
            self.instance = cls(*args, **kwargs)
            return None
        if spec.method == CHECKPOINT_METHOD:
            return self.checkpoint(spec)
        if spec.method == ONCE_METHOD:
            return self._once(*args, **kwargs)
        method = getattr(self.instance, spec.method, None) if not spec.method.startswith("_") else None
        if method is None or not callable(method):
            msg = f"{self.class_name} has no method {spec.method!r}"
            raise _ArgumentError(runtime_error(pb.NO_SUCH_METHOD, msg, self.actor_id))
        return method(*args, **kwargs)

    def _once(self, source: str, batch: int, seq: int, method: str, *args: Any, **kwargs: Any) -> Any:
        """``method(*args)`` unless this actor applied mark ``(batch, seq)`` of ``source`` already."""
        if self.watermarks.get(source, (-1, -1)) >= (batch, seq):
            return None  # a replayed micro-batch: applied before
        call = getattr(self.instance, method, None) if not method.startswith("_") else None
        if call is None or not callable(call):
            raise _ArgumentError(runtime_error(pb.NO_SUCH_METHOD, f"{self.class_name} has no method {method!r}",
                                               self.actor_id))
        result = call(*args, **kwargs)
        if not inspect.isawaitable(result):
            self.watermarks[source] = (batch, seq)
            return result

        async def applied() -> Any:  # the mark counts once the call succeeded: a failed one comes again
            value = await result
            self.watermarks[source] = (batch, seq)
            return value

        return applied()

    # ---- checkpoints --------------------------------------------------------------------------

    async def checkpoint(self, spec: pb.TaskSpec | None = None) -> dict[str, Any]:
        """Checkpoint now, between tasks; ``spec`` is the ``__checkpoint__`` task running, whose
        own result goes in the checkpoint (a re-send of it is answered from there)."""
        self.checkpoint_seq += 1
        self.since_checkpoint = 0
        directory = self.worker.ft.options.checkpoint_dir
        path = checkpoints.checkpoint_path(directory, self.actor_id, self.checkpoint_seq)
        result = {"actor_id": self.actor_id.hex(), "seq": self.checkpoint_seq, "path": str(path)}
        if spec is not None:
            self._keep(spec, pb.ObjectValue(object_id=ids.object_id(spec.task_id), value=serialize(result)))
        to_collect = checkpoints.covered_tasks(self.actor_id, self.collected, self.cut)
        # Collect what the previous checkpoint covered, not this one: a spec still on its way to
        # the store (a slow flush) would write its record again after the delete.
        self.collected, self.cut = dict(self.cut), dict(self.last_counter)
        snapshot = self._snapshot()  # now, synchronously: the state between two tasks
        await asyncio.to_thread(checkpoints.write_checkpoint, directory, snapshot)
        store = self.worker.ft.flusher.store if self.worker.ft.flusher is not None else None
        if store is not None:
            await store.set_checkpoint(self.actor_id, self.checkpoint_seq, str(path))
            if to_collect:
                self.worker.spawn(store.forget(self.actor_id, to_collect))
        return result

    async def _checkpoint_or_log(self) -> None:
        try:
            await self.checkpoint()
        except (OSError, ClusterError) as exc:  # the actor goes on; recovery uses the previous one
            log.error("actor %s: checkpoint failed: %s", ids.short(self.actor_id), exc)

    def _snapshot(self) -> checkpoint_pb2.ActorCheckpoint:
        senders = [
            checkpoint_pb2.SenderProgress(
                sender=sender, last_counter=last, collected=self.collected.get(sender, 0),
                results=[checkpoint_pb2.KeptResult(counter=c, value=v)
                         for c, v in self.results.get(sender, {}).items()],
            )
            for sender, last in self.last_counter.items()
        ]
        return checkpoint_pb2.ActorCheckpoint(
            actor_id=self.actor_id, seq=self.checkpoint_seq, creation=self.creation,
            state=checkpoints.snapshot_state(self.instance), last_executed=self.last_executed,
            executed=self.executed, senders=senders,
            counters=[checkpoint_pb2.SubmitCounter(receiver=r, count=n) for r, n in self.context.counters.items()],
            actors_created=self.context.actors_created,
            watermarks=[checkpoint_pb2.Watermark(source=k, batch=b, seq=q) for k, (b, q) in self.watermarks.items()],
        )

    def restore(self, checkpoint: checkpoint_pb2.ActorCheckpoint) -> None:
        """Take the state of ``checkpoint`` (before any task runs)."""
        self.instance = checkpoints.restore_state(checkpoint.creation, checkpoint.state)
        self.checkpoint_seq = checkpoint.seq
        self.last_executed = checkpoint.last_executed
        self.executed = checkpoint.executed
        for progress in checkpoint.senders:
            self.last_counter[progress.sender] = self.cut[progress.sender] = progress.last_counter
            self.collected[progress.sender] = progress.collected
            self.results[progress.sender] = OrderedDict((r.counter, r.value) for r in progress.results)
            self._kept_bytes[progress.sender] = sum(r.value.ByteSize() for r in progress.results)
        self.context.counters = {c.receiver: c.count for c in checkpoint.counters}
        self.context.actors_created = checkpoint.actors_created
        self.watermarks = {w.source: (w.batch, w.seq) for w in checkpoint.watermarks}

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
        self._holds = 0  # recoveries under way (this slot's own, and slots it inherits)

    def hold(self) -> None:
        """Recovering: keep arriving tasks until every ``hold`` is released (replays queue first)."""
        self._holds += 1
        if self._held is None:
            self._held = []

    def recover(self, actor_id: bytes, order: list[pb.TaskSpec],
                checkpoint: checkpoint_pb2.ActorCheckpoint | None = None) -> ActorInstance:
        """Rebuild ``actor_id``: restore ``checkpoint`` (if any), then re-execute ``order`` as
        recorded (with no checkpoint, ``order`` starts with the constructor)."""
        creation = checkpoint.creation if checkpoint is not None else order[0].actor_creation
        actor = self.actors[actor_id] = ActorInstance(self.worker, actor_id, creation)
        if checkpoint is not None:
            try:
                actor.restore(checkpoint)
            except Exception as exc:  # noqa: BLE001 - a user restore() or an unpicklable state
                msg = f"actor {creation.class_name}({ids.short(actor_id)}) could not restore its checkpoint: {exc!r}"
                actor.death = runtime_error(pb.ACTOR_DIED, msg, actor_id)
        for spec in order:
            actor.replay.add(spec.task_id)
            actor.mailbox.put_nowait(spec)
        if not order:
            actor.replayed.set()
        self._take_early(actor)
        return actor

    def _take_early(self, actor: ActorInstance) -> None:
        """Tasks that reached this process before its recovery held arrivals go after the replay."""
        for early in self._early.pop(actor.actor_id, []):
            actor.mailbox.put_nowait(early)

    def replay_diverged(self, spec: pb.TaskSpec, error: pb.RemoteError) -> None:
        """The receiver of ``spec`` saw its sender's replay re-send a call other than the one it
        ran: the sender's state is not the one its past produced."""
        actor = self.actors.get(spec.sender)
        if actor is not None:
            self._stop_replay(actor, error)

    def replay_lost_result(self, sender: SenderContext, error: pb.RemoteError) -> None:
        """A task of ``sender`` awaited a result its receiver no longer keeps: if it is a replayed
        task, it cannot do what it did before the failure."""
        actor = self.actors.get(sender.sender_id)
        if actor is not None and actor.replaying and actor.replaying == sender.current_task:
            self._stop_replay(actor, error)

    @staticmethod
    def _stop_replay(actor: ActorInstance, error: pb.RemoteError) -> None:
        """``actor`` cannot reproduce its past: it serves no more tasks, and says why."""
        if actor.death is None:
            who = f"{actor.class_name}({ids.short(actor.actor_id)})"
            msg = f"actor {who} was stopped, its replay failed: {error.message}"
            log.error("%s", msg)
            actor.death = runtime_error(pb.ACTOR_DIED, msg, actor.actor_id)

    def lost(self, actor_id: bytes, why: str) -> ActorInstance:
        """``actor_id`` cannot be rebuilt: its tasks fail with ActorDiedError saying ``why``."""
        actor = self.actors[actor_id] = ActorInstance(self.worker, actor_id, pb.ActorCreation(class_name="?"))
        actor.death = runtime_error(pb.ACTOR_DIED, why, actor_id)
        actor.replayed.set()
        self._take_early(actor)
        return actor

    def release(self) -> None:
        self._holds -= 1
        if self._holds:
            return
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

