"""The core every process runs: routing tasks and their results.

A ``Worker`` lives on one asyncio loop. Tasks are built in the callers' threads by its
``submitter`` and handed to the loop, where the worker sends them to the node serving their
actor's slot; drivers also call ``get`` from their threads. Node processes give it an
``ActorHost`` to run the actors they host. Tasks to actors in the same process skip gRPC. What it
knows of the cluster is in ``membership``, objects that move between processes in ``fetches``,
what it keeps for replays in ``retention``, and what fault tolerance does at each step in ``ft``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from google.protobuf.message import Message

from actorrt.core import failures, values
from actorrt.core.awaits import Awaits
from actorrt.core.call_windows import CallWindows
from actorrt.core.channels import Channels
from actorrt.core.membership import Membership
from actorrt.core.memory_pressure import MemoryPressure
from actorrt.core.object_ref import ObjectRef
from actorrt.core.ran_before import RanBefore
from actorrt.core.serialization import exception_from_error, runtime_error
from actorrt.core.submitter import Submitter
from actorrt.lineage import ids
from actorrt.lineage.options import DEFAULT_PINNED_BUDGET_BYTES, FaultToleranceOptions
from actorrt.lineage.strategies import create_strategy
from actorrt.lineage.strategy import FaultTolerance
from actorrt.net.peer_streams import (
    CANCEL,
    CHANNEL,
    CHECKPOINTED,
    COMMITTED,
    LINEAGE,
    OBJECT,
    PUSH,
    RESULT,
    SUBMIT,
    Router,
)
from actorrt.objects.fetches import Fetches
from actorrt.objects.host import host_identity
from actorrt.objects.retention import Retention
from actorrt.objects.shared import SharedObjects
from actorrt.objects.store import ObjectStore, shared_part
from actorrt.objects.traffic import SharedTraffic
from actorrt.rpc import checkpoint_pb2, head_pb2, node_pb2
from actorrt.rpc import common_pb2 as pb
from actorrt.store.clients import open_store
from actorrt.store.lineage_store import LineageStore
from actorrt.util.background import BackgroundTasks
from actorrt.util.lease import Lease

if TYPE_CHECKING:
    from actorrt.core.actor_host import ActorHost

log = logging.getLogger(__name__)
# Its own logger, for users to silence: logging.getLogger("actorrt.unretrieved").disabled = True
unretrieved_log = logging.getLogger("actorrt.unretrieved")
# Peer messages that carry an object's value (with its buffers in shared memory, maybe).
_VALUE_KINDS = frozenset({RESULT, PUSH, OBJECT})
_VALUE_FIELDS = frozenset({"result", "push", "object"})
# Failures that are the answer to what the user did (cancel, shutdown, a rollback they poll for).
_EXPECTED_FAILURES = frozenset({pb.CANCELLED, pb.CLUSTER_LOST, pb.ROLLED_BACK})
# A committed notice waits at most this long for a batch to the peer to ride with.
NOTICE_DELAY_S = 0.01
# A commit mark, to every process, waits at most this long: holders of the channel's lineage
# forward it with every task they send until they hear (a stream write costs ~120 µs of CPU).
MARK_DELAY_S = 0.01


@dataclass
class _Inflight:
    """A submitted task whose result has not come back; resubmitted if its node is recovered."""

    spec: pb.TaskSpec
    slot: int  # the slot its receiver was placed on (another one serves it if that one is gone)
    address: str  # the node process it was sent to ("": waiting for the slot to come back)
    arg_refs: list[ObjectRef] = field(default_factory=list)  # keep borrowed values alive
    large_args: list[pb.ObjectValue] = field(default_factory=list)  # sent beside the task, owned here
    push_large: bool = True  # send them beside it (else the receiver fetches them if it needs them)


class Worker:
    def __init__(self, token: str, identity: bytes, loop: asyncio.AbstractEventLoop) -> None:
        self.token = token
        self.loop = loop
        self.address = ""
        self.slot = -1  # the node slot this process serves (-1: a driver)
        self.closing = False  # fail_all ran: the process is going away
        self.epoch = 0  # and which incarnation of it this process is
        self.lease = Lease()  # a node acts only under it (see actorrt.util.lease); a driver's never ends
        self.objects = ObjectStore()
        self.shared: SharedObjects | None = None  # this process's shared memory, once it serves
        self.traffic: SharedTraffic | None = None  # its values that travel, once it serves
        self.retention = Retention(self.objects, DEFAULT_PINNED_BUDGET_BYTES)
        self.host: ActorHost | None = None
        self.router: Router | None = None
        self.ft: FaultTolerance | None = None  # from the first cluster view
        self.membership = Membership()
        self.windows = CallWindows(loop)
        self.submitter = Submitter(identity, self.membership, self.on_loop_thread,
                                   lambda *task: self.call_soon(self._send_task, *task), self.windows)
        # Set once this process answers for the objects it owns: at once, or for a restarted node
        # once its actors have replayed (a replay submits again the tasks whose results it owned).
        self.recovered = asyncio.Event()
        self._background = BackgroundTasks("worker")
        self.awaits = Awaits(lambda: self.ft.on_record)
        self.fetches = Fetches(self.objects, self.membership, self._send, self.spawn,
                               lambda task_id: task_id in self._inflight, self.recovered, self._pin,
                               lambda task_id, peer: self.ft.on_fetched(task_id, peer))
        self._inflight: dict[bytes, _Inflight] = {}  # in submission order
        # A replay's tasks that their receivers ran before the failure: sent if their results are asked for.
        self._deferred: dict[bytes, _Inflight] = {}
        # Under global rollback: calls that actors here sent and heard back from, by receiver, kept
        # until the receiver's checkpoint covers them. A global checkpoint takes each actor's state
        # when its barrier reaches it, so a call can run at its receiver after the receiver's
        # snapshot and be answered before its sender's: the call is in flight across the checkpoint
        # (Chandy-Lamport's channel state), and the sender's checkpoint must hold it to send again.
        self._uncovered: dict[bytes, dict[bytes, _Inflight]] = {}
        self.ran_before = RanBefore()  # what survivors ran of the actors being rebuilt here
        self.sends_skipped = 0
        self.pressure: MemoryPressure | None = None
        # Batches written by peers under a newer view than this process has: they wait for it. A
        # new node's first messages can beat its registration reply (peers learn its address from
        # the view that registers it), and a node that inherits a dead one's actors must hold their
        # tasks, and know it rebuilds their objects, before it handles any sent its way.
        self._ahead_of_view: list[tuple[str, node_pb2.PeerBatch]] = []
        self._loop_thread: int | None = None
        self.cluster_lost = ""  # why, once the head is gone for good
        self.polls: dict[bytes, asyncio.Task] = {}  # values being got for a later get or wait (core/values.py)
        # Messages of libraries on top of the runtime (actorrt.collective), by name.
        self.channels = Channels(loop, lambda address, message: self.router.send(address, CHANNEL, message))

    def bind(self, address: str) -> None:
        """Start routing as ``address`` (this process's gRPC server)."""
        self.address = self.fetches.address = self.submitter.address = self.channels.address = address
        self._loop_thread = threading.get_ident()
        self.shared = self.objects.shared = SharedObjects(host_identity(), address,
                                                          lambda *notice: self.traffic.notify(*notice))
        self.traffic = SharedTraffic(self.shared, self.token, self._send, self.call_soon, self.spawn, self.fetches,
                                     self._on_result)
        self.router = Router(address, self.token, self.on_batch, self._on_peer_lost,
                             lambda: self.membership.revision, self.lease, (os.getpid(), self.shared.host))

    async def serve_objects(self, host: str) -> None:
        """Answer pulls of this process's shared objects from other hosts, on ``host``."""
        self.shared.data_address = await self.traffic.transfers.start(host)

    def spawn(self, coro: Any) -> asyncio.Task:
        """Run ``coro`` in the background of this process (logged if it fails)."""
        return self._background.spawn(coro)

    def on_loop_thread(self) -> bool:
        return threading.get_ident() == self._loop_thread

    def call_soon(self, fn: Any, *args: Any) -> None:
        """Run ``fn(*args)`` on the loop: now if this is the loop's thread, else soon, in order."""
        if self.on_loop_thread():
            fn(*args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)

    def _send(self, address: str, kind: int, message: Message) -> None:
        if kind in _VALUE_KINDS and message.WhichOneof("kind") == "value" and message.value.HasField("shared"):
            message = self.traffic.lent(address, message)
        self.router.send(address, kind, message)

    def _on_peer_lost(self, address: str) -> None:
        self.fetches.on_peer_lost(address)
        self.traffic.peer_lost(address)

    # ---- cluster view -------------------------------------------------------------------------

    def apply_view(self, view: head_pb2.ClusterView) -> None:
        """Take a newer cluster view. Tasks sent to a node incarnation that died go again to the
        slot's restart (which replays its actors first), or to its heir; a function's call to any
        live node. They fail if there is none, or under global rollback."""
        if self.ft is None and view.revision >= self.membership.revision:
            self._start_fault_tolerance(view)
        gone = self.membership.apply(view)
        if gone is None:
            return
        for address in gone:
            if self.router is not None and address != self.address:
                self.router.forget(address)
            if self.shared is not None:
                self.shared.forget_holder(address)
        for tid, t in list(self._inflight.items()):
            info = self.membership.serving(t.slot)
            if info is not None and info.state == head_pb2.ALIVE and info.address == t.address:
                continue
            if self.ft.rolls_back and t.address:  # it ran, or would have, on a process that is gone
                del self._inflight[tid]
                self.windows.answered(tid)
                self.objects.put(failures.rolled_back(ids.object_id(tid), t.slot))
            elif t.spec.function and self.membership.alive_nodes():  # it kept nothing there: run it again
                if info is None or info.state != head_pb2.ALIVE:
                    t.slot = self.submitter.next_live_slot(t.spec.task_counter, "run the function on")
                self._resend(t)
            elif info is not None and info.state == head_pb2.ALIVE:
                self._resend(t)
            elif not self.membership.accepts(t.slot):
                del self._inflight[tid]
                self.windows.answered(tid)
                self.objects.put(self._died(ids.object_id(tid), t.slot))
            else:
                t.address = ""  # the head is restarting the slot
        self.fetches.reroute()
        self.membership.notify()
        waiting, self._ahead_of_view = self._ahead_of_view, []
        for peer, batch in waiting:  # in arrival order: those still ahead wait again, in order
            self.on_batch(peer, batch)

    def _start_fault_tolerance(self, view: head_pb2.ClusterView) -> None:
        def store() -> LineageStore:
            # Nodes write into groups by slot (spread over the shards); drivers anywhere.
            writer = self.slot if self.slot >= 0 else zlib.crc32(self.address.encode())
            return LineageStore(open_store(view.store_url, [s.address for s in view.store_shards],
                                           view.store_password), writer, self.epoch, self.lease)

        options = FaultToleranceOptions.from_proto(view.fault_tolerance)
        self.ft = self.submitter.ft = create_strategy(options, store)
        self.retention.budget_bytes = options.pinned_budget_bytes
        self.ft.start(self.spawn, self._tell_committed, self._announce_marks, self.address)
        if self.slot < 0 and self.ft.logs_lineage:  # a driver bounds what it keeps for replays
            self.pressure = MemoryPressure(self.retention, self.submitter, self.loop,
                                           lambda task_id: task_id in self._inflight)
            self.spawn(self.pressure.watch())

    def _tell_committed(self, peer: str, acks: list[tuple[bytes, int]]) -> None:
        # Nothing waits on it (the submitter lets the specs go from its stash): it rides with the
        # next batch to the peer.
        if self.router is not None:
            self.router.send_soon(peer, COMMITTED, node_pb2.Committed(task_ids=[t for t, _ in acks],
                                                                      versions=[v for _, v in acks]),
                                  NOTICE_DELAY_S)

    def _announce_marks(self, marks: list[tuple[bytes, bytes, int]]) -> None:
        if self.router is None:
            return
        receivers, senders, counters = zip(*marks, strict=True)
        notice = node_pb2.Committed(receivers=receivers, senders=senders, counters=counters)
        view = self.membership.view
        for address in {n.address for n in view.nodes if n.state == head_pb2.ALIVE} | set(view.drivers):
            if address and address != self.address:
                self.router.send_soon(address, COMMITTED, notice, MARK_DELAY_S)

    def _died(self, object_id: bytes, slot: int) -> pb.ObjectValue:
        return failures.died(object_id, slot, self.membership.node(slot), self.ft.mode)

    # ---- routing (loop thread) ----------------------------------------------------------------

    def _send_task(self, spec: pb.TaskSpec, slot: int, refs: list[ObjectRef], large: list[pb.ObjectValue],
                   push_large: bool = True) -> None:
        """Send to the actor's node slot, whichever incarnation is alive now (a restarted node
        replays the actor before it runs new tasks)."""
        self.submitter.handled += 1
        object_id = ids.object_id(spec.task_id)
        if not spec.HasField("actor_creation"):
            self.objects.expect(object_id)
            self.retention.referenced(object_id)  # by the ref submit_task returned
        deferred = not push_large and self.ran_before.covers(spec)  # a replay's call that its receiver ran
        if not push_large and not deferred:  # a replay's call that goes out: its large arguments to shared memory
            for value in large:
                self._to_shared(value)
        self._hold_large_args(large)
        if self.cluster_lost:
            self.objects.put(failures.cluster_lost(object_id, self.cluster_lost))
            self._drop_large_args(large)
            self.windows.answered(spec.task_id)
            return
        if not self.membership.accepts(slot):
            self.objects.put(self._died(object_id, slot))
            self._drop_large_args(large)
            self.windows.answered(spec.task_id)
            return
        task = _Inflight(spec, slot, "", refs, large, push_large)
        if deferred:
            self.windows.answered(spec.task_id)  # its receiver ran it: it holds no room in a window
            self._deferred[spec.task_id] = task
            self._pin_args(spec)
            self.sends_skipped += 1
            self.objects.defer(object_id, lambda: self._dispatch(self._deferred.pop(spec.task_id)),
                               lambda: self._deferred.pop(spec.task_id, None))
            return
        self._dispatch(task)

    def _to_shared(self, value: pb.ObjectValue) -> None:
        """Move ``value``'s buffers (held in this process's memory) to shared memory, if it can."""
        if value.value.buffers and not value.value.HasField("shared"):
            placed = self.shared.write([memoryview(b) for b in value.value.buffers])
            if placed is not None:
                del value.value.buffers[:]
                value.value.shared.CopyFrom(placed)

    def pending_sent(self, sender: bytes) -> list[checkpoint_pb2.PendingTask]:
        """The tasks ``sender`` (an actor here) sent that have no result yet, and under global
        rollback those its receivers' checkpoints do not cover yet, in the order they were sent."""
        uncovered = [t for kept in self._uncovered.values() for t in kept.values() if t.spec.sender == sender]
        unanswered = [t for t in [*self._inflight.values(), *self._deferred.values()] if t.spec.sender == sender]
        return [checkpoint_pb2.PendingTask(spec=t.spec, slot=t.slot,
                                           large_args=[self.shared.materialize(v) for v in t.large_args])
                for t in sorted(uncovered + unanswered, key=lambda t: t.spec.task_counter)]

    def send_again(self, pending: checkpoint_pb2.PendingTask) -> None:
        """Send again a task an actor restored from its checkpoint had sent before it (its receiver
        runs it unless it ran it already); its result comes back here."""
        spec = pb.TaskSpec()
        spec.CopyFrom(pending.spec)
        spec.owner_address = self.address
        large = list(pending.large_args)
        self._hold_large_args(large)
        self._dispatch(_Inflight(spec, pending.slot, "", [], large))

    def _hold_large_args(self, large: list[pb.ObjectValue]) -> None:
        for value in large:  # owned here: the receiver's replay fetches them from here
            self.objects.expect(value.object_id)
            self.objects.put(value)

    def _dispatch(self, task: _Inflight) -> None:
        """Track ``task`` until its result comes back; send it now if its slot is served."""
        spec = task.spec
        self._inflight[spec.task_id] = task
        if self.pressure is not None:
            self.pressure.sent(spec.receiver, task.slot)
        self._pin_args(spec)
        if self.membership.serving(task.slot).state == head_pb2.ALIVE:
            self._resend(task)

    def _pin_args(self, spec: pb.TaskSpec) -> None:
        """Ref arguments owned here are kept until the receiver's checkpoint covers the task."""
        if self.ft.logs_lineage and not spec.function:
            for arg in spec.args:
                if arg.HasField("ref") and arg.ref.owner_address == self.address:
                    self.retention.pin(arg.ref.object_id, spec.receiver, spec.sender, spec.task_counter)

    def _pin(self, object_id: bytes, receiver: bytes, sender: bytes, counter: int) -> None:
        """A receiver fetched ``object_id`` for a task: keep it for the task's replays, if any."""
        if self.ft is not None and self.ft.logs_lineage:  # elsewhere nothing is replayed
            self.retention.pin(object_id, receiver, sender, counter)

    def _drop_large_args(self, large: list[pb.ObjectValue]) -> None:
        """No replay will need these (nothing is logged, or the task never left)."""
        for value in large:
            self.retention.unreferenced(value.object_id)  # no ref here: freed unless pinned

    def _resend(self, task: _Inflight) -> None:
        """(Re)send ``task`` to the node serving its slot now, with its uncommitted lineage."""
        info = self.membership.serving(task.slot)
        task.address = info.address
        lineage = self.ft.on_submit(task.spec, info.address)  # SubmitTask
        if info.address == self.address:
            self._assign(task.spec)  # same process, same stash: no lineage to send
        else:
            for ancestor in lineage:  # ahead of the task on the same ordered stream
                self.router.send(info.address, LINEAGE, ancestor)
            for value in task.large_args if task.push_large else ():
                self._send(info.address, PUSH, value)
            if task.push_large:
                self._push_shared_refs(task, info.address)
            self.router.send(info.address, SUBMIT, task.spec)

    def _push_shared_refs(self, task: _Inflight, address: str) -> None:
        """Ref arguments this process owns and holds in shared memory go beside the task as well,
        with their producers' uncommitted lineage, as a fetch's answer would: the receiver maps
        them at once instead of asking for them (two messages fewer before the task runs)."""
        beside = {value.object_id for value in task.large_args}
        for arg in task.spec.args:
            if not arg.HasField("ref") or arg.ref.owner_address != self.address or arg.ref.object_id in beside:
                continue
            value = self.objects.held(arg.ref.object_id)
            if value is not None and shared_part(value) is not None:
                for ancestor in self.ft.on_fetched(ids.producer_task(value.object_id), address):
                    self.router.send(address, LINEAGE, ancestor)
                self._send(address, PUSH, value)

    def _assign(self, spec: pb.TaskSpec) -> None:
        if self.host is None:
            value = pb.ObjectValue(
                object_id=ids.object_id(spec.task_id),
                error=runtime_error(pb.UNKNOWN_ACTOR, "this process hosts no actors", spec.receiver),
            )
            self.send_result(spec.owner_address, value)
        else:
            self.host.assign(spec)

    def send_result(self, owner_address: str, value: pb.ObjectValue, task: pb.TaskSpec | None = None) -> None:
        """Send a result to its owner; with ``task`` (the version that ran), its lineage goes first."""
        if owner_address == self.address:
            self._on_result(value)
            return
        if task is not None:
            for ancestor in self.ft.on_result(task, owner_address):
                self.router.send(owner_address, LINEAGE, ancestor)
        self._send(owner_address, RESULT, value)

    def _on_result(self, value: pb.ObjectValue) -> None:
        # A replayed task's result may come again; only the first one counts.
        task = self._inflight.pop(ids.producer_task(value.object_id), None)
        if task is None:
            return
        self.windows.answered(task.spec.task_id)
        if value.error.kind == pb.REPLAY_DIVERGED and self.host is not None:
            self.host.replay_diverged(task.spec, value.error)
        if self.ft.rolls_back and self._sent_by_actor_here(task.spec):
            self._uncovered.setdefault(task.spec.receiver, {})[task.spec.task_id] = task
        elif not self.ft.logs_lineage or task.spec.function:  # no replay of the receiver needs them
            self._drop_large_args(task.large_args)
        if value.object_id not in self.objects and value.WhichOneof("kind") == "error":
            self._report_unretrieved(value.error)  # its ref is gone already
        self.objects.put(value)

    def _sent_by_actor_here(self, spec: pb.TaskSpec) -> bool:
        """An actor call from an actor this process hosts (what its checkpoints are about)."""
        return not spec.function and self.host is not None and spec.sender in self.host.actors

    def on_batch(self, peer: str, batch: node_pb2.PeerBatch) -> None:
        """A batch of messages from ``peer``'s stream (held while this process's view is older)."""
        if self._ahead_of_view or self.ft is None or batch.view_revision > self.membership.revision:
            self._ahead_of_view.append((peer, batch))
            return
        if batch.sender_epoch and not self.membership.incarnation_alive(batch.sender_slot, batch.sender_epoch):
            self._refuse_stale(peer, batch)
            return
        self.traffic.heard_from(peer, batch.sender_host, batch.sender_pid)
        for message in batch.messages:
            kind = message.WhichOneof("kind")
            if kind in _VALUE_FIELDS and (value := getattr(message, kind)).value.HasField("shared"):
                self.traffic.arrived(kind, value)
            elif kind == "submit":
                self.ft.on_receive(message.submit, peer)
                self._assign(message.submit)
            elif kind == "result":
                self._on_result(message.result)
            elif kind == "fetch":
                self.spawn(self.fetches.answer(peer, message.fetch))
            elif kind == "object":
                self.fetches.on_object(message.object)
            elif kind == "lineage":
                self.ft.on_lineage(message.lineage, peer)
            elif kind == "push":
                self.fetches.on_push(message.push)
            elif kind == "checkpointed":
                self.on_checkpointed(message.checkpointed)
            elif kind == "committed":
                committed = message.committed
                if committed.task_ids:
                    self.ft.on_committed(list(zip(committed.task_ids, committed.versions, strict=False)))
                if committed.receivers:
                    self.ft.on_committed_upto(list(zip(committed.receivers, committed.senders, committed.counters,
                                                       strict=False)))
            elif kind == "cancel" and self.host is not None:
                self.host.cancel(message.cancel)
            elif kind == "release":
                self.traffic.on_release(peer, message.release)
            elif kind == "forwarded":
                self.traffic.on_forwarded(message.forwarded)
            elif kind == "channel":
                self.channels.deliver(peer, message.channel)

    def _refuse_stale(self, peer: str, batch: node_pb2.PeerBatch) -> None:
        """A node incarnation declared dead (it hung, then resumed) sent a batch: it takes no effect."""
        log.warning("dropped a batch from %s: node %d (epoch %d) was declared dead", peer, batch.sender_slot,
                    batch.sender_epoch)
        self.router.forget(peer)

    def on_checkpointed(self, done: node_pb2.Checkpointed) -> None:
        """An actor checkpointed (here or elsewhere): stop keeping what only its replay needed."""
        covered = {c.actor: c.counter for c in done.received}
        self.retention.release(done.actor, covered)
        kept = self._uncovered.get(done.actor, {})
        for task_id, task in list(kept.items()):
            if task.spec.task_counter <= covered.get(task.spec.sender, 0):
                del kept[task_id]
                self._drop_large_args(task.large_args)
        self.ft.on_checkpointed(done.actor, covered)
        if self.host is not None:
            self.host.sender_checkpointed(done.actor, {c.actor: c.counter for c in done.sent})

    def announce_checkpoint(self, done: node_pb2.Checkpointed) -> None:
        """Tell every process (this one too) that an actor here checkpointed."""
        self.on_checkpointed(done)
        view = self.membership.view
        for address in {n.address for n in view.nodes if n.state == head_pb2.ALIVE} | set(view.drivers):
            if address and address != self.address:
                self.router.send(address, CHECKPOINTED, done)

    # ---- values -------------------------------------------------------------------------------

    def release(self, object_id: bytes, retrieved: bool) -> None:
        """An owned ref was garbage-collected (any thread); ``retrieved``: someone asked for its value."""
        if not self.loop.is_closed():
            try:
                self.call_soon(self._unreferenced, object_id, retrieved)
            except RuntimeError:  # the loop closed meanwhile
                pass

    def _unreferenced(self, object_id: bytes, retrieved: bool) -> None:
        value = None if retrieved else self.objects.held(object_id)
        if value is not None and value.WhichOneof("kind") == "error":
            self._report_unretrieved(value.error)
        self.retention.unreferenced(object_id)

    def _report_unretrieved(self, error: pb.RemoteError) -> None:
        """Say, in this process's log (a driver's stderr), that a task failed and nobody will see
        it: its ref was dropped without a get or an await (a fire-and-forget call)."""
        if error.kind not in _EXPECTED_FAILURES and not self.closing:
            unretrieved_log.error("a task failed and its result was never retrieved (its ref was dropped without "
                                  "get or await): %s", exception_from_error(error))

    async def get_async(self, ref: ObjectRef) -> Any:
        """``await ref`` from any event loop."""
        if self.on_loop_thread():
            return await values.value_of(self, ref)
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(values.value_of(self, ref), self.loop))

    def cancel(self, object_id: bytes) -> None:
        """Ask the receiver of the task that makes ``object_id`` not to start it."""
        task = self._inflight.get(ids.producer_task(object_id))
        if task is None or not task.address:
            return  # answered already, or not sent yet (it goes when its slot comes back)
        spec = task.spec
        notice = node_pb2.Cancel(task_id=spec.task_id, receiver=spec.receiver, sender=spec.sender,
                                 task_counter=spec.task_counter)
        if task.address == self.address:
            self.host.cancel(notice)
        else:
            self.router.send(task.address, CANCEL, notice)

    def pending_results(self) -> int:
        return len(self._inflight)

    # ---- the end ------------------------------------------------------------------------------

    def lose_cluster(self, reason: str) -> None:
        """The head is gone for good: what waits fails with ``ClusterError`` saying so, and so does
        every task submitted from now on; nothing is retried in the background any more."""
        self.cluster_lost = reason
        self._background.cancel_all()  # flushes to a store that went with the head, fetches
        self.fail_all(reason, pb.CLUSTER_LOST)
        self.apply_view(failures.all_dead(self.membership.view))  # a fetch of what they own fails at once

    def fail_all(self, reason: str, kind: int = pb.ACTOR_DIED) -> None:
        """Fail every task still waiting for a result (the cluster is going away)."""
        self.closing = True  # and nobody needs to hear of each of them
        for tid in self._inflight:
            self.objects.put(pb.ObjectValue(object_id=ids.object_id(tid), error=runtime_error(kind, reason)))
            self.windows.answered(tid)
        self._inflight.clear()
        self.fetches.fail_all(reason)

    async def aclose(self) -> None:
        self._background.cancel_all()
        if self.traffic is not None:
            await self.traffic.aclose()
        if self.ft is not None:
            await self.ft.aclose()
        if self.router is not None:
            await self.router.aclose()
        self.retention.close()
