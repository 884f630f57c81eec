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
import contextvars
import logging
import os
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from google.protobuf.message import Message

from actorrt.core import failures, freezing, values
from actorrt.core.awaits import Awaits
from actorrt.core.call_windows import CallWindows
from actorrt.core.channels import Channels
from actorrt.core.membership import Membership
from actorrt.core.memory_pressure import MemoryPressure
from actorrt.core.object_ref import ObjectRef
from actorrt.core.outbox import Outbox
from actorrt.core.ran_before import RanBefore
from actorrt.core.releases import Releases
from actorrt.core.serialization import runtime_error
from actorrt.core.standbys import Standbys
from actorrt.core.submitter import Submitter
from actorrt.core.task_spec import KILL_METHOD
from actorrt.core.unretrieved import UnretrievedErrors
from actorrt.lineage import ids
from actorrt.lineage.options import DEFAULT_PINNED_BUDGET_BYTES, FaultToleranceOptions
from actorrt.lineage.strategies import create_strategy
from actorrt.lineage.strategy import FaultTolerance
from actorrt.net.peer_streams import (
    CHANNEL,
    CHECKPOINTED,
    COMMITTED,
    LINEAGE,
    OBJECT,
    PUSH,
    RESULT,
    Router,
)
from actorrt.net.tls import TlsFiles
from actorrt.objects.fetches import Fetches
from actorrt.objects.host import host_identity
from actorrt.objects.retention import Retention
from actorrt.objects.shared import SharedObjects
from actorrt.objects.store import ObjectStore
from actorrt.objects.traffic import SharedTraffic
from actorrt.rpc import checkpoint_pb2, head_pb2, node_pb2
from actorrt.rpc import common_pb2 as pb
from actorrt.store.lineage_store import LineageStore
from actorrt.store.opening import follow_view, store_of_view
from actorrt.util.background import BackgroundTasks
from actorrt.util.lease import Lease

if TYPE_CHECKING:
    from actorrt.core.actor import ActorInstance
    from actorrt.core.actor_host import ActorHost

log = logging.getLogger(__name__)
# Peer messages that carry an object's value (with its buffers in shared memory, maybe).
_VALUE_KINDS = frozenset({RESULT, PUSH, OBJECT})
_VALUE_FIELDS = frozenset({"result", "push", "object"})
# A committed notice waits at most this long for a batch to the peer to ride with.
NOTICE_DELAY_S = 0.01
# A commit mark, to every process, waits at most this long: holders of the channel's lineage
# forward it with every task they send until they hear (a stream write costs ~120 µs of CPU).
MARK_DELAY_S = 0.01
# Methods blocked in get at once, per process, at most (more wait for a thread).
METHOD_THREADS = 256


class Worker:
    def __init__(self, token: str, identity: bytes, loop: asyncio.AbstractEventLoop,
                 tls: TlsFiles | None = None) -> None:
        self.token = token
        self.tls = tls  # mutual TLS to every peer (streams and pulls), when the cluster uses it
        self.store_tls = tls.for_store() if tls else None  # and to the store's servers where they serve it
        self.loop = loop
        self.address = ""
        self.slot = -1  # the node slot this process serves (-1: a driver)
        self.unretrieved = UnretrievedErrors()  # failures nobody asked for: told once, when their refs go
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
        self.outbox = Outbox(self)
        self.submitter = Submitter(identity, self.membership, self.on_loop_thread,
                                   lambda *task: self.call_soon(self.outbox.send_task, *task), self.windows)
        self.releases = Releases(self.submitter, self.unretrieved)  # actors released when their handle goes
        # Set once this process answers for the objects it owns: at once, or for a restarted node
        # once its actors have replayed (a replay submits again the tasks whose results it owned).
        self.recovered = asyncio.Event()
        self._background = BackgroundTasks("worker")
        # Threads for the methods that may block in get (core/blocking_calls.py): one per such call
        # under way, so that methods waiting on each other's actors never starve each other.
        self._method_threads = ThreadPoolExecutor(METHOD_THREADS, thread_name_prefix="actorrt-method")
        self.awaits = Awaits(lambda: self.ft.on_record)
        self.fetches = Fetches(self.objects, self.membership, self.send, self.spawn,
                               lambda task_id: task_id in self.outbox.inflight, self.recovered, self.outbox.pin,
                               lambda task_id, peer: self.ft.on_fetched(task_id, peer))
        self.ran_before = RanBefore()  # what survivors ran of the actors being rebuilt here
        self.pressure: MemoryPressure | None = None
        self.standbys = Standbys(self)  # of the actors here, and for actors elsewhere
        # Batches written by peers under a newer view than this process has: they wait for it. A
        # new node's first messages can beat its registration reply (peers learn its address from
        # the view that registers it), and a node that inherits a dead one's actors must hold their
        # tasks, and know it rebuilds their objects, before it handles any sent its way.
        self._ahead_of_view: list[tuple[str, node_pb2.PeerBatch]] = []
        self.frozen_for = 0  # the rollback round this process is frozen for (ft="checkpoint"; 0: none)
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
        self.traffic = SharedTraffic(self.shared, self.token, self.send, self.loop.call_soon_threadsafe, self.spawn,
                                     self.fetches, self.outbox.on_result, self.tls)
        self.router = Router(address, self.token, self.on_batch, self._on_peer_lost,
                             lambda: self.membership.revision, self.lease, (os.getpid(), self.shared.host), self.tls)

    async def serve_objects(self, host: str) -> None:
        """Answer pulls of this process's shared objects from other hosts, on ``host``."""
        self.shared.data_address = await self.traffic.transfers.start(host)

    def spawn(self, coro: Any) -> asyncio.Task:
        """Run ``coro`` in the background of this process (logged if it fails)."""
        return self._background.spawn(coro)

    async def off_loop(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` in a method thread, in this task's context (its actor, its running task)."""
        return await self.loop.run_in_executor(self._method_threads, contextvars.copy_context().run, fn, *args)

    def on_loop_thread(self) -> bool:
        return threading.get_ident() == self._loop_thread

    def call_soon(self, fn: Any, *args: Any) -> None:
        """Run ``fn(*args)`` on the loop: now if this is the loop's thread, else soon, in order."""
        if self.on_loop_thread():
            fn(*args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)

    def send(self, address: str, kind: int, message: Message) -> None:
        if kind in _VALUE_KINDS and message.WhichOneof("kind") == "value" and message.value.HasField("shared"):
            message = self.traffic.lent(address, message)
        self.router.send(address, kind, message)

    def _on_peer_lost(self, address: str) -> None:
        self.fetches.on_peer_lost(address)
        self.traffic.peer_lost(address)

    # ---- cluster view -------------------------------------------------------------------------

    def apply_view(self, view: head_pb2.ClusterView) -> None:
        """Take a newer cluster view; what was sent to processes that are gone goes again."""
        if self.ft is None and view.revision >= self.membership.revision:
            self._start_fault_tolerance(view)
        gone = self.membership.apply(view)
        if gone is None:
            return
        if self.ft is not None and self.ft.store is not None:  # a shard's replica may serve in its place now
            follow_view(self.ft.store.store, view)
        for address in gone:
            if self.router is not None and address != self.address:
                self.router.forget(address)
            if self.shared is not None:
                self.shared.holder_lost(address, dead=True)
        self.outbox.reroute()
        self.fetches.reroute()
        if self.ft is not None and self.ft.rolls_back:
            freezing.thaw(self, view, gone)
        if self.host is not None:
            self.standbys.on_view()
        self.membership.notify()
        waiting, self._ahead_of_view = self._ahead_of_view, []
        for peer, batch in waiting:  # in arrival order: those still ahead wait again, in order
            self.on_batch(peer, batch)

    # What actors and the node service ask of the outbox.

    def pending_sent(self, sender: bytes) -> list[checkpoint_pb2.PendingTask]:
        return self.outbox.pending_sent(sender)

    def keep_standby(self, actor: ActorInstance) -> None:
        self.standbys.place(actor)

    async def hand_to_standby(self, done: node_pb2.Checkpointed) -> None:
        await self.standbys.hand_over(done)

    def send_again(self, pending: checkpoint_pb2.PendingTask) -> None:
        self.outbox.send_again(pending)

    def cancel(self, object_id: bytes, interrupt: bool = False) -> None:
        self.outbox.cancel(object_id, interrupt)

    def pending_results(self) -> int:
        return len(self.outbox.inflight)

    def _start_fault_tolerance(self, view: head_pb2.ClusterView) -> None:
        def store() -> LineageStore:
            # Nodes write into groups by slot (spread over the shards); drivers anywhere.
            writer = self.slot if self.slot >= 0 else zlib.crc32(self.address.encode())
            return LineageStore(store_of_view(view, self.store_tls), writer, self.epoch, self.lease)

        options = FaultToleranceOptions.from_proto(view.fault_tolerance)
        self.ft = self.submitter.ft = create_strategy(options, store)
        self.retention.budget_bytes = options.pinned_budget_bytes
        self.ft.start(self.spawn, self._tell_committed, self._announce_marks, self.address)
        if self.slot < 0 and self.ft.logs_lineage:  # a driver bounds what it keeps for replays
            self.pressure = MemoryPressure(self.retention, self.submitter, self.loop,
                                           lambda task_id: task_id in self.outbox.inflight)
            self.spawn(self.pressure.watch())

    def _tell_committed(self, peer: str, acks: list[tuple[bytes, int]]) -> None:
        # Nothing waits on it (the submitter lets the specs go from its stash): it rides with the
        # next batch to the peer.
        if self.router is not None:
            self.router.send_soon(peer, COMMITTED, node_pb2.Committed(task_ids=[t for t, _ in acks],
                                                                      versions=[v for _, v in acks]),
                                  NOTICE_DELAY_S)

    def _announce_marks(self, marks: list[tuple[bytes, bytes, int]]) -> set[str]:
        """To every node process: drivers run no actors, so they hold little lineage, and what
        they hold they write themselves (a mark would cost them a stream read for nothing)."""
        if self.router is None:
            return set()
        receivers, senders, counters = zip(*marks, strict=True)
        notice = node_pb2.Committed(receivers=receivers, senders=senders, counters=counters)
        nodes = {n.address for n in self.membership.alive_nodes()} - {self.address, ""}
        for address in nodes:
            self.router.send_soon(address, COMMITTED, notice, MARK_DELAY_S)
        return nodes

    # ---- routing (loop thread) ----------------------------------------------------------------

    def assign(self, spec: pb.TaskSpec) -> None:
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
            self.outbox.on_result(value)
            return
        if task is not None:
            for ancestor in self.ft.on_result(task, owner_address):
                self.router.send(owner_address, LINEAGE, ancestor)
        self.send(owner_address, RESULT, value)

    def on_batch(self, peer: str, batch: node_pb2.PeerBatch) -> None:
        """A batch of messages from ``peer``'s stream (held while this process's view is older, or
        while it is frozen for a rollback round: ``core/freezing.py``)."""
        if (self._ahead_of_view or self.ft is None or batch.view_revision > self.membership.revision
                or self.frozen_for):
            self._ahead_of_view.append((peer, batch))
            return
        if batch.sender_epoch and not self.membership.incarnation_alive(batch.sender_slot, batch.sender_epoch):
            self._refuse_stale(peer, batch)
            return
        self.traffic.heard_from(peer, batch.sender_host, batch.sender_pid, batch.sender_serial)
        for message in batch.messages:
            kind = message.WhichOneof("kind")
            if kind in _VALUE_FIELDS and (value := getattr(message, kind)).value.HasField("shared"):
                self.traffic.arrived(kind, value)
            elif kind == "submit":
                self.ft.on_receive(message.submit, peer)
                self.assign(message.submit)
            elif kind == "result":
                self.outbox.on_result(message.result)
            elif kind == "fetch":
                self.spawn(self.fetches.answer(peer, message.fetch))
            elif kind == "object":
                self.fetches.on_object(message.object)
            elif kind == "lineage":
                self.ft.on_lineage(message.lineage, peer)
            elif kind == "push":
                self.fetches.on_push(message.push)
            elif kind == "checkpointed":
                self.on_checkpointed(message.checkpointed, peer)
            elif kind == "standby_loaded":
                self.standbys.on_loaded(message.standby_loaded)
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
            elif kind == "passed":
                self.traffic.on_passed(message.passed)
            elif kind == "channel":
                self.channels.deliver(peer, message.channel)

    def _refuse_stale(self, peer: str, batch: node_pb2.PeerBatch) -> None:
        """A node incarnation declared dead (it hung, then resumed) sent a batch: it takes no effect."""
        log.warning("dropped a batch from %s: node %d (epoch %d) was declared dead", peer, batch.sender_slot,
                    batch.sender_epoch)
        self.router.forget(peer)

    def on_checkpointed(self, done: node_pb2.Checkpointed, peer: str = "") -> None:
        """An actor checkpointed (here or elsewhere, on process ``peer``): stop keeping what only
        its replay needed. One told to its standby alone is only loaded there."""
        if self.host is not None:
            self.standbys.on_checkpointed(done, peer or self.address)
        if done.to_standby:
            return
        covered = {c.actor: c.counter for c in done.received}
        self.retention.release(done.actor, covered)
        self.outbox.checkpointed(done.actor, covered)
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

    def release(self, object_id: bytes, retrieved: bool, owned: bool) -> None:
        """A ref that is owned or was polled was garbage-collected (any thread); ``retrieved``:
        someone asked for its value."""
        if not self.loop.is_closed():
            try:
                self.call_soon(self._unreferenced, object_id, retrieved, owned)
            except RuntimeError:  # the loop closed meanwhile
                pass

    def _unreferenced(self, object_id: bytes, retrieved: bool, owned: bool) -> None:
        poll = self.polls.pop(object_id, None)
        if poll is not None:  # the value a wait kept for a later get (its arrays map a segment): none can come now
            poll.cancel()
        if not owned:
            return
        created = self.unretrieved.dropped(object_id, None if retrieved else self.objects.held(object_id))
        self.retention.unreferenced(object_id)
        if created is not None:
            self.releases.handle_gone(created, going_away=self.unretrieved.closing or bool(self.cluster_lost))

    def kill(self, actor_id: bytes, slot: int) -> ObjectRef:
        """Send ``actor_id`` its kill, and behind it on the same stream the notice that interrupts
        what runs and is queued ahead of it; the ref to the kill's answer."""
        killed = self.submitter.submit_task(actor_id, slot, KILL_METHOD, (), {})
        self.call_soon(self.cancel, killed.object_id, True)
        return killed

    async def get_async(self, ref: ObjectRef) -> Any:
        """``await ref`` from any event loop."""
        if self.on_loop_thread():
            return await values.value_of(self, ref)
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(values.value_of(self, ref), self.loop))

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
        self.unretrieved.close(self.objects.held)  # and nobody needs to hear of each of them
        self.outbox.fail_all(reason, kind)
        self.fetches.fail_all(reason)

    async def aclose(self) -> None:
        self._background.cancel_all()
        self._method_threads.shutdown(wait=False, cancel_futures=True)
        self.releases.close()
        if self.traffic is not None:
            await self.traffic.aclose()
        if self.ft is not None:
            await self.ft.aclose()
        if self.router is not None:
            await self.router.aclose()
        self.retention.close()
