"""The actors a node process hosts, by actor ID: tasks queued for them, and their recovery.

A task that reaches a node before its actor's creation (the handle travelled faster than the
creation task) waits a moment for it. While the node recovers, arrivals are held until the
replays are queued, so recorded tasks run first.
"""

from __future__ import annotations

import asyncio
import logging

from actorrt.core import context, held_outputs
from actorrt.core.actor import ActorInstance, ActorServices
from actorrt.core.concurrent_calls import actor_steps
from actorrt.core.function_calls import FunctionCalls
from actorrt.core.ledger import results_unasked
from actorrt.core.serialization import runtime_error
from actorrt.core.task_spec import SenderContext
from actorrt.lineage import ids
from actorrt.rpc import checkpoint_pb2, node_pb2
from actorrt.rpc import common_pb2 as pb

log = logging.getLogger(__name__)

# A task can reach a node before the creation of its actor when it comes over another stream
# (the handle travelled faster than the creation task); it waits this long for the actor.
UNKNOWN_ACTOR_GRACE_S = 2.0


class ActorHost:
    """The actors of this node, by actor ID."""

    def __init__(self, services: ActorServices) -> None:
        self.services = services
        self.actors: dict[bytes, ActorInstance] = {}
        self.functions = FunctionCalls(services)  # remote-function calls: no actor, no mailbox
        self._early: dict[bytes, list[pb.TaskSpec]] = {}  # tasks that beat their actor's creation
        self._held: list[pb.TaskSpec] | None = None  # arrivals while recovering
        self._holds = 0  # recoveries under way (this slot's own, and slots it inherits)
        services.awaits.before_waiting = self.before_waiting
        self._expected: set[bytes] = set()  # actors a standby here is taking the place of: their tasks wait

    def hold(self) -> None:
        """Recovering: keep arriving tasks until every ``hold`` is released (replays queue first)."""
        self._holds += 1
        if self._held is None:
            self._held = []

    def expect(self, actor_id: bytes) -> None:
        """A standby here takes ``actor_id``'s place: its tasks wait for ``recover`` (or ``lost``)
        however long that takes, while the other actors here run on."""
        self._expected.add(actor_id)

    def recover(self, actor_id: bytes, order: list[pb.TaskSpec],
                checkpoint: checkpoint_pb2.ActorCheckpoint | None = None, path: str = "",
                instance: object = None) -> ActorInstance:
        """Rebuild ``actor_id``: restore ``checkpoint`` (if any; from file ``path``, or a standby's
        ``instance`` restored from it), then re-execute ``order`` as recorded (with no checkpoint,
        ``order`` starts with the constructor)."""
        creation = checkpoint.creation if checkpoint is not None else order[0].actor_creation
        actor = self.actors[actor_id] = ActorInstance(self.services, actor_id, creation)
        actor.timers.live = False  # armed once the replay is over
        if checkpoint is not None:
            try:
                actor.checkpointer.restore(checkpoint, path, instance)
            except Exception as exc:  # noqa: BLE001 - a user restore() or an unpicklable state
                actor.die(pb.ACTOR_DIED, f"actor {actor.who} could not restore its checkpoint: {exc!r}")
        actor.replay_order = order
        if actor.creation.max_concurrency > 1:  # live steps come after the steps the replay recorded
            actor_steps(actor).replaying(order)
        actor.results_unasked = results_unasked(order)
        for spec in order:
            actor.replay.add(spec.task_id)
            actor.mailbox.put_nowait(spec)
        if not order:
            actor.replayed.set()
            actor.timers.resume()
        self._take_early(actor)
        self.services.keep_standby(actor)
        return actor

    def _take_early(self, actor: ActorInstance) -> None:
        """Tasks that reached this process before its recovery held arrivals go after the replay."""
        self._expected.discard(actor.actor_id)
        for early in self._early.pop(actor.actor_id, []):
            actor.mailbox.put_nowait(early)

    def drop_tasks_from(self, addresses: set[str]) -> None:
        """Under ``ft="checkpoint"``: the tasks that node incarnations now gone (at ``addresses``)
        sent here and that have not run are dropped; their senders went back to before they sent
        them, and send again what they send again (``core/freezing.py``)."""
        for actor in self.actors.values():
            queue = actor.mailbox._queue  # asyncio.Queue keeps its items in a deque; there is no public view
            kept = [spec for spec in queue if spec.owner_address not in addresses]
            if len(kept) != len(queue):
                queue.clear()
                queue.extend(kept)
        for early in [*self._early.values(), *([self._held] if self._held is not None else [])]:
            early[:] = [spec for spec in early if spec.owner_address not in addresses]

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
        running = context.running_task.get(None)
        if actor is not None and running is not None and running.replayed \
                and running.spec.task_id == sender.current_task:
            self._stop_replay(actor, error)

    @staticmethod
    def _stop_replay(actor: ActorInstance, error: pb.RemoteError) -> None:
        """``actor`` cannot reproduce its past: it serves no more tasks, and says why."""
        if actor.death is None:
            msg = f"actor {actor.who} was stopped, its replay failed: {error.message}"
            log.error("%s", msg)
            actor.die(pb.ACTOR_DIED, msg)
            actor.tell_stopped(msg)

    def lost(self, actor_id: bytes, why: str) -> ActorInstance:
        """``actor_id`` cannot be rebuilt: its tasks fail with ActorDiedError saying ``why``."""
        actor = self.actors[actor_id] = ActorInstance(self.services, actor_id, pb.ActorCreation(class_name="?"))
        actor.die(pb.ACTOR_DIED, why)
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
        if spec.function:
            self.functions.assign(spec)
            return
        actor = self.actors.get(spec.receiver)
        if spec.receiver in self._expected:
            # Its standby is taking its place: it waits for the replay to be queued (also what the
            # restore sends it, which a restart's hold keeps back the same way).
            self._early.setdefault(spec.receiver, []).append(spec)
            return
        if actor is None and spec.HasField("actor_creation"):
            actor = self.actors[spec.receiver] = ActorInstance(self.services, spec.receiver, spec.actor_creation)
            actor.mailbox.put_nowait(spec)
            for early in self._early.pop(spec.receiver, []):
                actor.mailbox.put_nowait(early)
            return
        if actor is None:
            waiting = self._early.setdefault(spec.receiver, [])
            if not waiting and spec.receiver not in self._expected:
                asyncio.get_running_loop().call_later(UNKNOWN_ACTOR_GRACE_S, self._expire, spec.receiver)
            waiting.append(spec)
            return
        actor.mailbox.put_nowait(spec)

    def _expire(self, actor_id: bytes) -> None:
        if actor_id in self._expected:
            return
        for spec in self._early.pop(actor_id, []):
            self.services.fetches.drop_unused(spec)
            msg = f"no actor {ids.short(actor_id)} on node {self.services.address}"
            error = runtime_error(pb.UNKNOWN_ACTOR, msg, actor_id)
            value = pb.ObjectValue(object_id=ids.object_id(spec.task_id), error=error)
            self.services.send_result(spec.owner_address, value)

    async def before_waiting(self, waiter: SenderContext) -> None:
        """An actor's task is about to wait. If the actor holds outputs (a checkpointing policy),
        what it waits for may depend on them, and a checkpoint, which would send them, comes only
        between tasks: everything it holds leaves now, its lineage written first. (Not for a
        producer's back-pressure: ``held_outputs.waiting_behind``.)"""
        actor = self.actors.get(waiter.sender_id)
        if actor is not None and actor.held is not None and len(actor.held) and not held_outputs.behind.get():
            await actor.escape(waiter.current_task)

    def yet_to_end(self, producer: bytes, task_id: bytes) -> bool:
        """Whether task ``task_id`` of ``producer`` (an actor, or a function call) is queued or
        running here: awaiting its value waits for it to run, not merely for the value to come."""
        if task_id in self.functions.running:
            return True
        actor = self.actors.get(producer)
        waiting = [*(actor.waiting() if actor is not None else ()), *self._early.get(producer, ()),
                   *(self._held or ())]
        running = actor is not None and (actor.running == task_id or task_id in actor.calls_running)
        return running or any(s.task_id == task_id for s in waiting)

    def cancel(self, notice: node_pb2.Cancel) -> None:
        """Do not start the task if it has not started (``actorrt.cancel``); a task that ran (or is
        running: its sender's tasks run in counter order) is left alone. A kill's notice
        (``interrupt``) interrupts what runs ahead of it instead."""
        if notice.receiver == ids.FUNCTIONS:
            self.functions.cancel(notice)
            return
        actor = self.actors.get(notice.receiver)
        if actor is None or actor.ledger.last_counter.get(notice.sender, 0) >= notice.task_counter:
            return
        if notice.interrupt:
            actor.kill_notice(notice.task_id)
        else:
            actor.cancelled.add(notice.task_id)

    def sender_checkpointed(self, sender: bytes, sent: dict[bytes, int]) -> None:
        """``sender``'s checkpoint covers its tasks to these actors up to ``sent[actor]``: its replay
        never re-sends them, so their kept results can go."""
        for receiver, counter in sent.items():
            actor = self.actors.get(receiver)
            if actor is not None:
                actor.ledger.drop_results(sender, counter)

    def ran_from(self, senders: set[bytes]) -> list[node_pb2.RanFrom]:
        """How far each actor here ran the tasks of ``senders`` (a recovery rebuilding them asks).
        A checkpointing actor's count stops at its durable checkpoint: it may go back to it."""
        out = []
        for actor in self.actors.values():
            for sender, counter in actor.ledger.last_counter.items():
                if actor.held is not None:
                    counter = min(counter, actor.checkpointer.durable_from(sender))
                if sender in senders and counter:
                    counters, digests = actor.ledger.calls_run(sender)
                    out.append(node_pb2.RanFrom(receiver=actor.actor_id, sender=sender, counter=counter,
                                                counters=counters, digests=digests))
        return out

    def stats(self) -> list[node_pb2.ActorStats]:
        return [
            node_pb2.ActorStats(
                actor_id=a.actor_id, class_name=a.class_name, queued=a.mailbox.qsize(),
                executed=a.executed, dead=a.death is not None, results_kept_bytes=a.ledger.kept_bytes(),
                standby=a.standby,
                **a.published(),
            )
            for a in self.actors.values()
        ] + self.functions.stats()

    def stop(self) -> None:
        for actor in self.actors.values():
            actor.stop()
        self.functions.stop()

