"""The core every process runs: submitting tasks, routing them, holding and fetching results.

A ``Worker`` lives on one asyncio loop. Drivers call into it from other threads through the
thread-safe entry points (``submit_task``, ``create_actor``, ``get``); node processes also give it
an ``ActorHost`` to run the actors they host. Tasks to actors in the same process skip gRPC.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from actorrt import application_log, ids
from actorrt.background import BackgroundTasks
from actorrt.exceptions import ActorRTError, ClusterError, GetTimeoutError
from actorrt.fault_tolerance import LOGGING_MODES, FaultTolerance, FaultToleranceOptions
from actorrt.lineage_store import LineageStore
from actorrt.object_ref import ObjectRef
from actorrt.object_store import ObjectStore
from actorrt.rpc import common_pb2 as pb
from actorrt.rpc import head_pb2, node_pb2
from actorrt.serialization import deserialize, exception_from_error, runtime_error
from actorrt.store import open_store
from actorrt.task_spec import SenderContext, build_task, encode_args
from actorrt.transport import FETCH, LINEAGE, OBJECT, RESULT, SUBMIT, Router

if TYPE_CHECKING:
    from actorrt.actor_host import ActorHost
    from actorrt.handles import ActorHandle

log = logging.getLogger(__name__)

# A fetch whose stream to the owner broke is sent again after this long (the head's view of the
# owner's fate arrives meanwhile; sending at once would only reconnect to a dead process).
REFETCH_DELAY_S = 0.2

# The actor whose task is running now; unset outside tasks (the process itself submits then).
current_sender: contextvars.ContextVar[SenderContext] = contextvars.ContextVar("current_sender")


@dataclass
class _Inflight:
    """A submitted task whose result has not come back; resubmitted if its node is recovered."""

    spec: pb.TaskSpec
    slot: int  # the slot its receiver was placed on (another one serves it if that one is gone)
    address: str  # the node process it was sent to ("": waiting for the slot to come back)
    arg_refs: list[ObjectRef] = field(default_factory=list)  # keep borrowed values alive


class Worker:
    def __init__(self, token: str, identity: bytes, loop: asyncio.AbstractEventLoop) -> None:
        self.token = token
        self.loop = loop
        self.address = ""
        self.slot = -1  # the node slot this process serves (-1: a driver)
        self.process_context = SenderContext(identity)
        self.objects = ObjectStore()
        self.host: ActorHost | None = None
        self.router: Router | None = None
        self.ft: FaultTolerance | None = None  # from the first cluster view
        self.view = head_pb2.ClusterView()
        self._nodes: dict[int, head_pb2.NodeInfo] = {}
        self._view_changed = asyncio.Event()
        self._inflight: dict[bytes, _Inflight] = {}  # in submission order
        self._fetches: dict[bytes, str] = {}  # object id -> the owner address its ref names
        self._fetched_from: dict[bytes, str] = {}  # object id -> the process asked ("" = waiting)
        self._incarnations: dict[str, int] = {}  # every node process address seen -> its slot
        self._drivers_seen: set[str] = set()  # every driver address seen in a view
        # Set once this process answers for the objects it owns: at once, or for a restarted node
        # once its actors have replayed (a replay submits again the tasks whose results it owned).
        self.recovered = asyncio.Event()
        self._borrowed: dict[bytes, int] = {}  # fetched object id -> tasks using it
        # Batches written by peers under a newer view than this process has: they wait for it. A
        # new node's first messages can beat its registration reply (peers learn its address from
        # the view that registers it), and a node that inherits a dead one's actors must hold their
        # tasks, and know it rebuilds their objects, before it handles any sent its way.
        self._ahead_of_view: list[tuple[str, node_pb2.PeerBatch]] = []
        self._loop_thread: int | None = None
        # Submissions built (in callers' threads, under the sender's lock) and handled (on the loop):
        # two counters with one writer each, so their difference needs no lock.
        self._built = 0
        self._handled = 0
        self._background = BackgroundTasks("worker")

    def bind(self, address: str) -> None:
        """Start routing as ``address`` (this process's gRPC server)."""
        self.address = address
        self._loop_thread = threading.get_ident()
        self.router = Router(address, self.token, self._on_batch, self._on_peer_lost, lambda: self.view.revision)

    def spawn(self, coro: Any) -> asyncio.Task:
        """Run ``coro`` in the background of this process (logged if it fails)."""
        return self._background.spawn(coro)

    def on_loop_thread(self) -> bool:
        return threading.get_ident() == self._loop_thread

    def _call_soon(self, fn: Any, *args: Any) -> None:
        if self.on_loop_thread():
            fn(*args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)

    # ---- cluster view -------------------------------------------------------------------------

    def apply_view(self, view: head_pb2.ClusterView) -> None:
        """Take a newer cluster view. Tasks sent to a node incarnation that died wait for the head
        to restart its slot and go again to the new one (which replays its actors first), or to
        the live slot that inherits the actors of a slot that will not come back; they fail only
        if there is none, or with ``ft="checkpoint"``, where the whole cluster has rolled back to
        its last global checkpoint."""
        if view.revision < self.view.revision:
            return
        if self.ft is None:
            self._start_lineage_logging(view)
        old = self._nodes
        self.view = view
        self._nodes = {n.slot: n for n in view.nodes}
        self._incarnations.update((n.address, n.slot) for n in view.nodes if n.address)
        self._drivers_seen.update(view.drivers)
        for slot, info in old.items():
            new = self._nodes.get(slot)
            if info.address and (new is None or new.epoch != info.epoch or new.state != head_pb2.ALIVE):
                if self.router is not None and info.address != self.address:
                    self.router.forget(info.address)
        rollback = self.ft.mode == "checkpoint"
        for tid, t in list(self._inflight.items()):
            info = self._serving(t.slot)
            if info is not None and info.state == head_pb2.ALIVE and info.address == t.address:
                continue
            if rollback and t.address:  # it ran, or would have, on a process that is gone
                del self._inflight[tid]
                self.objects.put(self._rolled_back(ids.object_id(tid), t.slot))
            elif info is not None and info.state == head_pb2.ALIVE:
                self._resend(t)
            elif info is None or not info.managed:
                del self._inflight[tid]
                self.objects.put(self._died(ids.object_id(tid), t.slot))
            else:
                t.address = ""  # the head is restarting the slot
        for object_id in list(self._fetches):
            self._route_fetch(object_id)
        self._view_changed.set()
        self._view_changed = asyncio.Event()
        waiting, self._ahead_of_view = self._ahead_of_view, []
        for peer, batch in waiting:  # in arrival order: those still ahead wait again, in order
            self._on_batch(peer, batch)

    def _start_lineage_logging(self, view: head_pb2.ClusterView) -> None:
        options = FaultToleranceOptions.from_proto(view.fault_tolerance)
        store = None
        if options.mode in LOGGING_MODES:
            store = LineageStore(open_store(
                view.store_url, [s.address for s in view.store_shards], view.store_password))
        self.ft = FaultTolerance.create(options, store)
        if self.ft.flusher is not None:
            self._background.spawn(self.ft.flusher.run())

    async def wait_view(self, predicate: Any, timeout: float) -> None:
        """Wait until ``predicate(self)`` holds for the current view."""
        async with asyncio.timeout(timeout):
            while not predicate(self):
                await self._view_changed.wait()

    def alive_nodes(self) -> list[head_pb2.NodeInfo]:
        return sorted((n for n in self._nodes.values() if n.state == head_pb2.ALIVE), key=lambda n: n.slot)

    def node(self, slot: int) -> head_pb2.NodeInfo | None:
        return self._nodes.get(slot)

    def _incarnation_alive(self, slot: int, epoch: int) -> bool:
        info = self._nodes.get(slot)
        return info is not None and info.epoch == epoch and info.state == head_pb2.ALIVE

    def _serving(self, slot: int) -> head_pb2.NodeInfo | None:
        """The node serving ``slot``'s actors: the slot itself, or, for a slot that will not come
        back, the live slot that inherited them (following inheritances of inheritances)."""
        info = self._nodes.get(slot)
        for _ in range(len(self._nodes)):  # bounded, whatever the view says
            if info is None or not info.HasField("heir"):
                break
            info = self._nodes.get(info.heir)
        return info

    def _died(self, object_id: bytes, slot: int) -> pb.ObjectValue:
        info = self._nodes.get(slot)
        msg = (f"node {slot} (incarnation {info.epoch if info else 0}) died and will not be restarted, and no "
               f"live node inherited its actors (ft={self.ft.mode}); they are gone")
        return pb.ObjectValue(object_id=object_id, error=runtime_error(pb.ACTOR_DIED, msg))

    def _rolled_back(self, object_id: bytes, slot: int) -> pb.ObjectValue:
        msg = (f"node {slot} was restarted by a global rollback (ft=checkpoint): every actor is back at the last "
               f"global checkpoint; resubmit the work done since")
        return pb.ObjectValue(object_id=object_id, error=runtime_error(pb.ROLLED_BACK, msg))

    # ---- submitting (any thread) --------------------------------------------------------------

    def _sender(self) -> SenderContext:
        return current_sender.get(self.process_context)

    def submit_task(self, handle: ActorHandle, method: str, args: Sequence[Any],
                    kwargs: dict[str, Any]) -> ObjectRef:
        """Submit ``handle.method(*args, **kwargs)``; returns the ref to its result."""
        wire_args, refs = encode_args(args, kwargs)
        self._wait_for_stash_room()
        ctx = self._sender()
        with ctx.lock:
            spec = build_task(ctx, handle.actor_id, method, wire_args, refs, self.address)
            object_id = ids.object_id(spec.task_id)
            ref = ObjectRef(object_id, self.address, owned=True)
            self._built += 1
            self._call_soon(self._send_task, spec, handle.slot, refs)
        return ref

    def _wait_for_stash_room(self) -> None:
        """Back-pressure for driver threads (actors wait in their runner instead).

        Counts the submissions still queued for the loop too, so a fast thread cannot overshoot
        the bound before the loop has stashed what it sent.
        """
        ft = self.ft
        if ft is None or ft.mode != "lineage_stash" or self.on_loop_thread():
            return
        while len(ft.stash) + self._built - self._handled >= ft.options.stash_limit:
            time.sleep(0.002)

    def create_actor(self, creation: pb.ActorCreation, args: Sequence[Any],
                     kwargs: dict[str, Any], node: int | None) -> tuple[bytes, int]:
        """Place and create an actor; returns its (actor id, slot). Tasks go to whichever
        incarnation of the slot is alive: a restarted one rebuilds the actor."""
        wire_args, refs = encode_args(args, kwargs)
        ctx = self._sender()
        with ctx.lock:
            actor_id = ctx.next_actor_id()
            slot = self._place(node, ctx.actors_created)
            creation.slot = slot
            spec = build_task(ctx, actor_id, "__init__", wire_args, refs, self.address, creation)
            self._built += 1
            self._call_soon(self._send_task, spec, slot, refs)
        return actor_id, slot

    def _place(self, node: int | None, counter: int) -> int:
        """The slot for a new actor: ``node``, or the next live one. Inside an actor task the
        choice is logged in the task's application log, so a replay places the actor where the
        lost run did, whichever nodes are alive then (its tasks follow the slot to whoever serves
        it). A slot restarting, or inherited by a live node, is served; a dead one alone is not."""
        alive = self.alive_nodes()
        if node is None:
            if not alive:
                raise ClusterError("no live node to place the actor on")
            return application_log.record(lambda: alive[counter % len(alive)].slot, self.ft.on_record)
        served = self._serving(node)
        if served is None or (served.state != head_pb2.ALIVE and not served.managed):
            known = ", ".join(str(n.slot) for n in alive) or "none"
            raise ClusterError(f"node {node} is not a live node (live nodes: {known})")
        return node

    # ---- routing (loop thread) ----------------------------------------------------------------

    def _send_task(self, spec: pb.TaskSpec, slot: int, refs: list[ObjectRef]) -> None:
        """Send to the actor's node slot, whichever incarnation is alive now (a restarted node
        replays the actor before it runs new tasks)."""
        self._handled += 1
        object_id = ids.object_id(spec.task_id)
        if not spec.HasField("actor_creation"):
            self.objects.expect(object_id)
        info = self._serving(slot)
        if info is None or (info.state != head_pb2.ALIVE and not info.managed):
            self.objects.put(self._died(object_id, slot))
            return
        task = self._inflight[spec.task_id] = _Inflight(spec, slot, "", refs)
        if info.state == head_pb2.ALIVE:
            self._resend(task)

    def _resend(self, task: _Inflight) -> None:
        """(Re)send ``task`` to the node serving its slot now, with its uncommitted lineage."""
        info = self._serving(task.slot)
        task.address = info.address
        lineage = self.ft.on_submit(task.spec, info.address)  # SubmitTask
        if info.address == self.address:
            self._assign(task.spec)  # same process, same stash: no lineage to send
        else:
            for ancestor in lineage:  # ahead of the task on the same ordered stream
                self.router.send(info.address, LINEAGE, ancestor)
            self.router.send(info.address, SUBMIT, task.spec)

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
        self.router.send(owner_address, RESULT, value)

    def _on_result(self, value: pb.ObjectValue) -> None:
        # A replayed task's result may come again; only the first one counts.
        task = self._inflight.pop(ids.producer_task(value.object_id), None)
        if task is None:
            return
        if value.error.kind == pb.REPLAY_DIVERGED and self.host is not None:
            self.host.replay_diverged(task.spec, value.error)
        self.objects.put(value)

    def _on_batch(self, peer: str, batch: node_pb2.PeerBatch) -> None:
        if self._ahead_of_view or self.ft is None or batch.view_revision > self.view.revision:
            self._ahead_of_view.append((peer, batch))
            return
        for message in batch.messages:
            kind = message.WhichOneof("kind")
            if kind == "submit":
                self.ft.on_receive(message.submit, peer)
                self._assign(message.submit)
            elif kind == "result":
                self._on_result(message.result)
            elif kind == "fetch":
                self._background.spawn(self._answer_fetch(peer, message.fetch.object_id))
            elif kind == "object":
                self._fetches.pop(message.object.object_id, None)
                self._fetched_from.pop(message.object.object_id, None)
                self.objects.put(message.object)
            elif kind == "lineage":
                self.ft.on_lineage(message.lineage, peer)

    def _on_peer_lost(self, peer: str) -> None:
        # Tasks sent to a dead node wait for the view that says so (apply_view resends them), and
        # so do fetches from it: its restarted incarnation owns the object again after its replay.
        # Asked again a little later: by then the view says where the object's owner is.
        for object_id, asked in list(self._fetched_from.items()):
            if asked == peer:
                self._fetched_from[object_id] = ""
                self.loop.call_later(REFETCH_DELAY_S, self._refetch, object_id)

    def _refetch(self, object_id: bytes) -> None:
        if object_id in self._fetches and self._fetched_from.get(object_id) == "":
            self._route_fetch(object_id)

    def _current_owner(self, owner: str) -> str | None:
        """Where the object a ref names with owner ``owner`` is now: that process, the node now
        serving its slot (which rebuilt it), "" while the slot restarts, or None if it is gone for
        good (a driver, or a slot that will not come back and that no node inherited)."""
        slot = self._incarnations.get(owner)
        if slot is None:  # a driver, or a process this one has not seen in a view yet
            gone = owner in self._drivers_seen and owner not in self.view.drivers
            return None if gone else owner
        info = self._serving(slot)
        if info is not None and info.state == head_pb2.ALIVE:
            return info.address
        return "" if info is not None and info.managed else None

    def _route_fetch(self, object_id: bytes) -> None:
        """Ask the owner of a fetched object where it is now, unless asked there already."""
        named = self._fetches[object_id]
        owner = self._current_owner(named)
        asked = self._fetched_from.get(object_id)
        if owner is None:
            del self._fetches[object_id]
            self._fetched_from.pop(object_id, None)
            msg = f"the owner of object {ids.short(object_id)} ({named}) went away"
            self.objects.put(pb.ObjectValue(object_id=object_id, error=runtime_error(pb.OBJECT_LOST, msg)))
        elif owner != asked:
            self._fetched_from[object_id] = owner
            if owner == self.address:
                self._borrowed.pop(object_id, None)  # this process owns it again: not a borrowed copy
                self._background.spawn(self._answer_local_fetch(object_id))
            elif owner:
                self.router.send(owner, FETCH, node_pb2.ObjectRequest(object_id=object_id))

    async def _answer_local_fetch(self, object_id: bytes) -> None:
        """A ref named this node slot's previous incarnation: the replay submits the task that
        makes its value again, unless the previous incarnation had released it."""
        rebuilt = await self._rebuilt(lambda: ids.producer_task(object_id) in self._inflight
                                      or self.objects.expect(object_id).done())
        self._fetches.pop(object_id, None)
        self._fetched_from.pop(object_id, None)
        if not rebuilt:
            msg = f"object {ids.short(object_id)} was released by its owner before it failed"
            self.objects.put(pb.ObjectValue(object_id=object_id, error=runtime_error(pb.OBJECT_LOST, msg)))

    # ---- objects ------------------------------------------------------------------------------

    async def _answer_fetch(self, peer: str, object_id: bytes) -> None:
        self.router.send(peer, OBJECT, await self._owned_value(object_id))

    async def _rebuilt(self, present: Any) -> bool:
        """Whether ``present()`` holds, waiting for it while this process recovers (a replay may
        submit the task that makes an object again at any point, and may itself wait for it)."""
        while not present():
            if self.recovered.is_set():
                return False
            await asyncio.sleep(0.005)
        return True

    async def _owned_value(self, object_id: bytes) -> pb.ObjectValue:
        if await self._rebuilt(lambda: object_id in self.objects):
            return await asyncio.shield(self.objects.expect(object_id))
        msg = f"object {ids.short(object_id)} is not held by its owner {self.address}"
        return pb.ObjectValue(object_id=object_id, error=runtime_error(pb.OBJECT_LOST, msg))

    async def resolve(self, ref: pb.ObjectRefProto) -> pb.ObjectValue:
        """The wire value of ``ref``, fetched from its owner if this process does not hold it."""
        object_id = ref.object_id
        if object_id not in self.objects and ref.owner_address == self.address:
            msg = f"object {ids.short(object_id)} was released by its owner"
            return pb.ObjectValue(object_id=object_id, error=runtime_error(pb.OBJECT_LOST, msg))
        if object_id not in self.objects:
            self._borrowed[object_id] = 0
            self._fetches[object_id] = ref.owner_address
            fut = self.objects.expect(object_id)
            self._route_fetch(object_id)
        else:
            fut = self.objects.expect(object_id)
        if object_id in self._borrowed:
            self._borrowed[object_id] += 1
        return await asyncio.shield(fut)

    def unborrow(self, object_id: bytes) -> None:
        """A task is done with a fetched object; drop the copy when no task uses it."""
        n = self._borrowed.get(object_id)
        if n is None:
            return
        if n <= 1:
            del self._borrowed[object_id]
            self.objects.release(object_id)
        else:
            self._borrowed[object_id] = n - 1

    def release(self, object_id: bytes) -> None:
        """An owned ref was garbage-collected (any thread)."""
        if not self.loop.is_closed():
            try:
                self._call_soon(self.objects.release, object_id)
            except RuntimeError:  # the loop closed meanwhile
                pass

    async def get_value(self, ref: ObjectRef) -> Any:
        try:
            value = await self.resolve(ref.to_proto())
            if value.WhichOneof("kind") == "error":
                if value.error.kind == pb.RESULT_NOT_KEPT and self.host is not None:
                    self.host.replay_lost_result(self._sender(), value.error)
                raise exception_from_error(value.error)
            return deserialize(value.value)
        finally:
            self.unborrow(ref.object_id)

    async def get_async(self, ref: ObjectRef) -> Any:
        """``await ref`` from any event loop."""
        if self.on_loop_thread():
            return await self.get_value(ref)
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self.get_value(ref), self.loop))

    def get(self, refs: ObjectRef | Sequence[ObjectRef], timeout: float | None) -> Any:
        """Blocking ``get`` for threads other than the loop's."""
        if self.on_loop_thread():
            raise ActorRTError("actorrt.get() would block the event loop; use `await ref` in async methods")
        single = isinstance(refs, ObjectRef)
        items = [refs] if single else list(refs)
        for r in items:
            if not isinstance(r, ObjectRef):
                raise TypeError(f"get() takes ObjectRefs, got {type(r).__name__}")

        async def gather() -> list[Any]:
            return await asyncio.gather(*(self.get_value(r) for r in items))

        fut = asyncio.run_coroutine_threadsafe(asyncio.wait_for(gather(), timeout), self.loop)
        try:
            values = fut.result()
        except TimeoutError:
            raise GetTimeoutError(f"get() timed out after {timeout} s") from None
        return values[0] if single else values

    def pending_results(self) -> int:
        return len(self._inflight)

    def lose_cluster(self, reason: str) -> None:
        """The head is gone for good: every node counts as dead, so nothing waits on them."""
        view = head_pb2.ClusterView()
        view.CopyFrom(self.view)
        view.revision += 1
        for node in view.nodes:
            node.state = head_pb2.DEAD
            node.managed = False  # no head to restart them
        self.apply_view(view)
        self.fail_all(reason)

    def fail_all(self, reason: str) -> None:
        """Fail every task still waiting for a result (the cluster is going away)."""
        for tid in self._inflight:
            self.objects.put(pb.ObjectValue(object_id=ids.object_id(tid), error=runtime_error(pb.ACTOR_DIED, reason)))
        self._inflight.clear()
        for object_id in self._fetches:
            self.objects.put(pb.ObjectValue(object_id=object_id, error=runtime_error(pb.OBJECT_LOST, reason)))
        self._fetches.clear()
        self._fetched_from.clear()

    async def aclose(self) -> None:
        self._background.cancel_all()
        if self.ft is not None and self.ft.flusher is not None:
            await self.ft.flusher.store.aclose()
        if self.router is not None:
            await self.router.aclose()

