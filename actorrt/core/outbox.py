"""The tasks a process sent, until their results come back (SubmitTask's side of the core).

``Outbox`` sends each task to the node serving its receiver's slot, with the uncommitted lineage
the fault-tolerance strategy returns and the large arguments that travel beside it; it sends
again what a failed node had not answered (to the slot's restart, which replays first, or to its
heir); it pins what a replay may ask for again; and it takes results in. Under global rollback it
also keeps answered calls until their receivers' checkpoints cover them. The receiving side (peer
batches, running tasks, sending results) is the ``Worker``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from actorrt.core import failures
from actorrt.core.answered_calls import AnsweredCalls
from actorrt.core.object_ref import ObjectRef
from actorrt.core.serialization import runtime_error
from actorrt.core.task_spec import sender_replayed
from actorrt.lineage import ids
from actorrt.lineage.options import FaultToleranceMode
from actorrt.net.peer_streams import CANCEL, LINEAGE, PUSH, SUBMIT
from actorrt.objects.store import shared_part
from actorrt.rpc import checkpoint_pb2, head_pb2, node_pb2
from actorrt.rpc import common_pb2 as pb

if TYPE_CHECKING:
    from actorrt.core.held_outputs import HeldOutputs
    from actorrt.core.worker import Worker


@dataclass
class _Inflight:
    """A submitted task whose result has not come back; resubmitted if its node is recovered."""

    spec: pb.TaskSpec
    slot: int  # the slot its receiver was placed on (another one serves it if that one is gone)
    address: str  # the node process it was sent to ("": waiting for the slot to come back)
    arg_refs: list[ObjectRef] = field(default_factory=list)  # keep borrowed values alive
    large_args: list[pb.ObjectValue] = field(default_factory=list)  # sent beside the task, owned here
    push_large: bool = True  # send them beside it (else the receiver fetches them if it needs them)


class Outbox:
    def __init__(self, worker: Worker) -> None:
        self._w = worker
        self.inflight: dict[bytes, _Inflight] = {}  # in submission order
        # A replay's tasks that their receivers ran before the failure: sent if their results are asked for.
        self.deferred: dict[bytes, _Inflight] = {}
        # Calls answered and kept, by receiver, until the receiver's checkpoint covers them: those
        # whose receiver logs no lineage of them (a checkpointing policy's acknowledgements, sent
        # again to the receiver's restart), and under global rollback those that actors here sent.
        # A global checkpoint takes each actor's state when its barrier reaches it, so a call can
        # run at its receiver after the receiver's snapshot and be answered before its sender's:
        # the call is in flight across the checkpoint (Chandy-Lamport's channel state), and the
        # sender's checkpoint must hold it to send again.
        self.uncovered: dict[bytes, dict[bytes, _Inflight]] = {}
        self.answered = AnsweredCalls()
        # Under global rollback, per sender here and receiver: the last call whose answer came
        # back, of those whose answer said more than that the call ran (the rollback frontier's
        # ``Cut.answered``); and the rollbacks of every node seen so far (None: no view yet).
        self.answered_upto: dict[bytes, dict[bytes, int]] = {}
        self._rollbacks_seen: int | None = None
        self.sends_skipped = 0

    def _answered(self, spec: pb.TaskSpec) -> None:
        """``spec`` has its result or failed: room in its window, and never sent again."""
        self._w.windows.answered(spec.task_id)
        if not sender_replayed(spec, self._w.ft.logs_lineage):  # the only senders that say it (resend)
            self.answered.answered(spec)

    def reroute(self) -> None:
        """After a new cluster view: tasks sent to a node incarnation that died go again to the
        slot's restart (which replays its actors first, or restores them from the global
        checkpoint), or to its heir; a function's call to any live node. They fail if there is
        none, or if every node went back to the global checkpoint."""
        w = self._w
        seen, self._rollbacks_seen = self._rollbacks_seen, w.membership.view.rollbacks
        everyone_back = w.ft.rolls_back and seen is not None and seen != self._rollbacks_seen
        if everyone_back:  # a driver resumes from the checkpoint: what it kept for a rollback goes
            for kept in self.uncovered.values():
                for t in kept.values():
                    self.drop_large_args(t.large_args)
            self.uncovered.clear()
            self.answered_upto.clear()
        self._resend_uncovered()
        for tid, t in list(self.inflight.items()):
            if not t.spec.function:
                t.slot = w.membership.slot_for(t.spec.receiver, t.slot)
            info = w.membership.serving(t.slot)
            if info is not None and info.state == head_pb2.ALIVE and info.address == t.address:
                continue
            if everyone_back:  # it ran, or would have, on a state that is gone: the driver resumes
                del self.inflight[tid]
                self._answered(t.spec)
                w.objects.put(failures.rolled_back(ids.object_id(tid), t.slot))
            elif t.spec.function and w.membership.alive_nodes():  # it kept nothing there: run it again
                if info is None or info.state != head_pb2.ALIVE:
                    t.slot = w.submitter.next_live_slot(t.spec.task_counter, "run the function on")
                self.resend(t)
            elif info is not None and info.state == head_pb2.ALIVE:
                self.resend(t)
            elif not w.membership.accepts(t.slot):
                del self.inflight[tid]
                self._answered(t.spec)
                w.objects.put(self._died(ids.object_id(tid), t.slot))
            else:
                t.address = ""  # the head is restarting the slot

    def _resend_uncovered(self) -> None:
        """Calls to actors that log no lineage, answered and not yet covered by their checkpoints,
        go again to a receiver's new node: it went back to its checkpoint. (Before the calls still
        unanswered, which come after them in each channel; a receiver that ran one answers it from
        its ledger.)"""
        w = self._w
        for kept in self.uncovered.values():
            for t in sorted(kept.values(), key=lambda t: t.spec.task_counter):
                t.slot = w.membership.slot_for(t.spec.receiver, t.slot)
                info = w.membership.serving(t.slot)
                if info is None or info.state != head_pb2.ALIVE:
                    t.address = ""  # to the slot's restart, once it is alive
                elif info.address != t.address:
                    self.resend(t)

    def checkpointed(self, receiver: bytes, covered: dict[bytes, int]) -> None:
        """``receiver``'s checkpoint covers these calls (per sender, up to a counter): not kept any more."""
        kept = self.uncovered.get(receiver, {})
        for task_id, task in list(kept.items()):
            if task.spec.task_counter <= covered.get(task.spec.sender, 0):
                del kept[task_id]
                self.drop_large_args(task.large_args)

    def fail_all(self, reason: str, kind: int) -> None:
        """Fail every task still waiting for a result."""
        for tid, task in self.inflight.items():
            self._w.objects.put(pb.ObjectValue(object_id=ids.object_id(tid), error=runtime_error(kind, reason)))
            self._answered(task.spec)
        self.inflight.clear()

    def _died(self, object_id: bytes, slot: int) -> pb.ObjectValue:
        return failures.died(object_id, slot, self._w.membership.node(slot), self._w.ft.mode)

    def send_task(self, spec: pb.TaskSpec, slot: int, refs: list[ObjectRef], large: list[pb.ObjectValue],
                   push_large: bool = True) -> None:
        """Send to the actor's node slot, whichever incarnation is alive now (a restarted node
        replays the actor before it runs new tasks)."""
        self._w.submitter.handled += 1
        slot = self._w.membership.slot_for(spec.receiver, slot)
        object_id = ids.object_id(spec.task_id)
        self._w.objects.expect(object_id)
        self._w.retention.referenced(object_id)  # by the ref the submitter returned (a creation's: its handle's)
        deferred = not push_large and self._w.ran_before.covers(spec)  # a replay's call that its receiver ran
        if not push_large and not deferred:  # a replay's call that goes out: its large arguments to shared memory
            for value in large:
                self._to_shared(value)
        self._hold_large_args(large)
        if self._refused(spec, slot, large):
            return
        task = _Inflight(spec, slot, "", refs, large, push_large)
        held = self._held_by(spec, push_large)
        if held is not None:  # an actor that checkpoints: its call leaves once reproducible
            held.hold_call(spec, slot, large, lambda: self._release(task))
            return
        if deferred:
            self._w.windows.answered(spec.task_id)  # its receiver ran it: it holds no room in a window
            self.deferred[spec.task_id] = task
            self._pin_args(spec)
            self.sends_skipped += 1
            self._w.objects.defer(object_id, lambda: self._dispatch(self.deferred.pop(spec.task_id)),
                                  lambda: self.deferred.pop(spec.task_id, None))
            return
        self._dispatch(task)

    def _release(self, task: _Inflight) -> None:
        """A held call leaves, for whichever process serves its receiver now (or fails as a call
        sent now would)."""
        task.slot = self._w.membership.slot_for(task.spec.receiver, task.slot)
        if not self._refused(task.spec, task.slot, task.large_args):
            self._dispatch(task)

    def _refused(self, spec: pb.TaskSpec, slot: int, large: list[pb.ObjectValue]) -> bool:
        """Whether ``spec`` fails instead of going out: the cluster is lost, or ``slot`` is dead for
        good (its result is the error)."""
        if not self._w.cluster_lost and self._w.membership.accepts(slot):
            return False
        object_id = ids.object_id(spec.task_id)
        self._w.objects.put(failures.cluster_lost(object_id, self._w.cluster_lost) if self._w.cluster_lost
                            else self._died(object_id, slot))
        self.drop_large_args(large)
        self._answered(spec)
        return True

    def _held_by(self, spec: pb.TaskSpec, fresh: bool) -> HeldOutputs | None:
        """Where ``spec`` waits, if an actor here made it that holds its outputs (a call to
        itself goes at once: it goes back with it; a replay's calls went out before)."""
        host = self._w.host
        actor = host.actors.get(spec.sender) if host is not None else None
        if actor is None or actor.held is None or spec.receiver == spec.sender or not fresh:
            return None
        return actor.held

    def _to_shared(self, value: pb.ObjectValue) -> None:
        """Move ``value``'s buffers (held in this process's memory) to shared memory, if it can."""
        if value.value.buffers and not value.value.HasField("shared"):
            placed = self._w.shared.write([memoryview(b) for b in value.value.buffers])
            if placed is not None:
                del value.value.buffers[:]
                value.value.shared.CopyFrom(placed)

    def pending_sent(self, sender: bytes) -> list[checkpoint_pb2.PendingTask]:
        """The tasks ``sender`` (an actor here) sent that have no result yet, those kept until their
        receivers' checkpoints cover them, and those it holds (a checkpointing policy), in the
        order they were sent."""
        actor = self._w.host.actors.get(sender) if self._w.host is not None else None
        # Through the receivers it called (the calls kept for other senders here may be many).
        receivers = actor.context.counters if actor is not None else []
        uncovered = [t for r in receivers for t in self.uncovered.get(r, {}).values() if t.spec.sender == sender]
        unanswered = [t for t in [*self.inflight.values(), *self.deferred.values()] if t.spec.sender == sender]
        held = actor.held.calls() if actor is not None and actor.held is not None else []
        return [checkpoint_pb2.PendingTask(spec=t.spec, slot=t.slot,
                                           large_args=[self._w.shared.materialize(v) for v in t.large_args])
                for t in sorted([*uncovered, *unanswered, *held], key=lambda t: t.spec.task_counter)]

    def send_again(self, pending: checkpoint_pb2.PendingTask) -> None:
        """Send again a task an actor restored from its checkpoint had sent before it (its receiver
        runs it unless it ran it already); its result comes back here."""
        spec = pb.TaskSpec()
        spec.CopyFrom(pending.spec)
        spec.owner_address = self._w.address
        large = list(pending.large_args)
        self._hold_large_args(large)
        self._dispatch(_Inflight(spec, self._w.membership.slot_for(spec.receiver, pending.slot), "", [], large))

    def _hold_large_args(self, large: list[pb.ObjectValue]) -> None:
        for value in large:  # owned here: the receiver's replay fetches them from here
            self._w.objects.expect(value.object_id)
            self._w.objects.put(value)

    def _dispatch(self, task: _Inflight) -> None:
        """Track ``task`` until its result comes back; send it now if its slot is served."""
        spec = task.spec
        self.inflight[spec.task_id] = task
        if self._w.pressure is not None:
            self._w.pressure.sent(spec.receiver, task.slot)
        self._pin_args(spec)
        if self._w.membership.serving(task.slot).state == head_pb2.ALIVE:
            self.resend(task)

    def _pin_args(self, spec: pb.TaskSpec) -> None:
        """Ref arguments owned here are kept until the receiver's checkpoint covers the task."""
        if self._w.ft.logs_lineage and not spec.function:
            for arg in spec.args:
                if arg.HasField("ref") and arg.ref.owner_address == self._w.address:
                    self._w.retention.pin(arg.ref.object_id, spec.receiver, spec.sender, spec.task_counter)

    def pin(self, object_id: bytes, receiver: bytes, sender: bytes, counter: int) -> None:
        """A receiver fetched ``object_id`` for a task: keep it for the task's replays, if any."""
        if self._w.ft is not None and self._w.ft.logs_lineage:  # elsewhere nothing is replayed
            self._w.retention.pin(object_id, receiver, sender, counter)

    def drop_large_args(self, large: list[pb.ObjectValue]) -> None:
        """No replay will need these (nothing is logged, or the task never left)."""
        for value in large:
            self._w.retention.unreferenced(value.object_id)  # no ref here: freed unless pinned

    def resend(self, task: _Inflight) -> None:
        """(Re)send ``task`` to the node serving its slot now, with its uncommitted lineage."""
        info = self._w.membership.serving(task.slot)
        task.address = info.address
        spec = task.spec
        if not sender_replayed(spec, self._w.ft.logs_lineage):  # see AnsweredCalls
            spec.answered_upto = self.answered.upto(spec.sender, spec.receiver)
        lineage = self._w.ft.on_submit(task.spec, info.address)  # SubmitTask
        if info.address == self._w.address:
            self._w.assign(task.spec)  # same process, same stash: no lineage to send
        else:
            for ancestor in lineage:  # ahead of the task on the same ordered stream
                self._w.router.send(info.address, LINEAGE, ancestor)
            for value in task.large_args if task.push_large else ():
                self._w.send(info.address, PUSH, value)
            if task.push_large:
                self._push_shared_refs(task, info.address)
            self._w.router.send(info.address, SUBMIT, task.spec)

    def _push_shared_refs(self, task: _Inflight, address: str) -> None:
        """Ref arguments this process owns and holds in shared memory go beside the task as well,
        with their producers' uncommitted lineage, as a fetch's answer would: the receiver maps
        them at once instead of asking for them (two messages fewer before the task runs)."""
        beside = {value.object_id for value in task.large_args}
        for arg in task.spec.args:
            if not arg.HasField("ref") or arg.ref.owner_address != self._w.address or arg.ref.object_id in beside:
                continue
            value = self._w.objects.held(arg.ref.object_id)
            if value is not None and shared_part(value) is not None:
                for ancestor in self._w.ft.on_fetched(ids.producer_task(value.object_id), address):
                    self._w.router.send(address, LINEAGE, ancestor)
                self._w.send(address, PUSH, value)

    def on_result(self, value: pb.ObjectValue) -> None:
        """A task's result came back (a replayed task's may come again: only the first counts)."""
        task = self.inflight.pop(ids.producer_task(value.object_id), None)
        if task is None:
            return
        self._answered(task.spec)
        if value.error.kind == pb.REPLAY_DIVERGED and self._w.host is not None:
            self._w.host.replay_diverged(task.spec, value.error)
        rolls_back = self._w.ft.rolls_back and self._kept_for_rollback(task.spec)
        if rolls_back and not value.keep_call:  # an answer the caller may depend on
            spec = task.spec
            upto = self.answered_upto.setdefault(spec.sender, {})
            upto[spec.receiver] = max(upto.get(spec.receiver, 0), spec.task_counter)
        if (value.keep_call or rolls_back) and not task.spec.function:
            # Its receiver logs no lineage of it (a checkpointing policy), or rolls back with
            # everyone: kept until the receiver's checkpoint covers it.
            self.uncovered.setdefault(task.spec.receiver, {})[task.spec.task_id] = task
        elif not self._w.ft.logs_lineage or task.spec.function:  # no replay of the receiver needs them
            self.drop_large_args(task.large_args)
        if value.object_id not in self._w.objects:
            self._w.unretrieved.arrived_late(value)  # its ref is gone already
        self._w.objects.put(value)

    def _kept_for_rollback(self, spec: pb.TaskSpec) -> bool:
        """An actor call from an actor this process hosts (what its checkpoints are about), or a
        driver's own: kept until its receiver's checkpoint covers it, and sent again if the
        receiver goes back while its sender stays."""
        if spec.function:
            return False
        w = self._w
        if w.host is not None:
            return spec.sender in w.host.actors
        # (Under ft="global_rollback" a driver resumes from the checkpoint instead.)
        own = spec.sender == w.submitter.process_context.sender_id
        return own and w.ft.options.mode is FaultToleranceMode.CHECKPOINT

    def kept_from(self) -> dict[tuple[bytes, bytes], int]:
        """Per (sender, receiver): the first actor call this process still keeps, to send again."""
        first: dict[tuple[bytes, bytes], int] = {}
        kept = [t for calls in self.uncovered.values() for t in calls.values()]
        for t in [*kept, *self.inflight.values()]:
            spec = t.spec
            if not spec.function:
                key = (spec.sender, spec.receiver)
                first[key] = min(first.get(key, spec.task_counter), spec.task_counter)
        return first

    def cancel(self, object_id: bytes, interrupt: bool = False) -> None:
        """Ask the receiver of the task that makes ``object_id`` not to start it; ``interrupt``:
        the task is a kill, which interrupts what runs and is queued ahead of it instead."""
        task = self.inflight.get(ids.producer_task(object_id))
        if task is None or not task.address:
            return  # answered already, or not sent yet (it goes when its slot comes back)
        spec = task.spec
        notice = node_pb2.Cancel(task_id=spec.task_id, receiver=spec.receiver, sender=spec.sender,
                                 task_counter=spec.task_counter, interrupt=interrupt)
        if task.address == self._w.address:
            self._w.host.cancel(notice)
        else:
            self._w.router.send(task.address, CANCEL, notice)
