"""Submitting tasks from any thread: specs are built in the caller's thread and handed to the loop.

Drivers submit from many threads (notebooks, Spark callbacks), actors from their node's loop. A
task's spec is built under its sender's lock, so counter order is queueing order, and handed to
the event loop, where the ``Worker`` routes it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from actorrt.core import context, interruptions
from actorrt.core.call_windows import CallWindows
from actorrt.core.membership import Membership
from actorrt.core.object_ref import ObjectRef
from actorrt.core.task_spec import EncodedArgs, SenderContext, attach_large_args, build_task, encode_args
from actorrt.exceptions import ActorRTError, ClusterError
from actorrt.lineage import ids
from actorrt.lineage.options import DEFAULT_INLINE_MAX_BYTES
from actorrt.lineage.strategy import FaultTolerance
from actorrt.rpc import common_pb2 as pb

# How long a driver's submission waits for room in a full stash before it raises.
STASH_FULL_TIMEOUT_S = 60.0

# Runs on the loop: (spec, slot, ref arguments, large arguments, whether to push those beside it).
HandOff = Callable[[pb.TaskSpec, int, list[ObjectRef], list[pb.ObjectValue], bool], None]


class Submitter:
    def __init__(self, identity: bytes, membership: Membership, on_loop_thread: Callable[[], bool],
                 hand_off: HandOff, windows: CallWindows) -> None:
        self.address = ""  # this process's, once it serves (results come back there)
        self.ft: FaultTolerance | None = None  # from the first cluster view
        # Tasks submitted outside any actor task come from the process itself.
        self.process_context = SenderContext(identity)
        self._membership = membership
        self._on_loop_thread = on_loop_thread
        self._hand_off = hand_off
        self.windows = windows  # calls in flight on bounded channels (max_in_flight)
        self.ephemeral: set[bytes] = set()  # actors here that keep no state (and so make no calls)
        # Submissions built (in callers' threads, under the sender's lock) and handled (on the loop):
        # two counters with one writer each, so their difference needs no lock.
        self.built = 0
        self.handled = 0

    def sender(self) -> SenderContext:
        """The actor whose task is running now, else this process."""
        return context.current_sender.get(self.process_context)

    def submit_task(self, actor_id: bytes, slot: int, method: str, args: Sequence[Any],
                    kwargs: dict[str, Any], bounded: bool = False) -> ObjectRef:
        """Submit ``method(*args, **kwargs)`` to actor ``actor_id`` placed on ``slot``; returns
        the ref to its result. ``bounded``: the call counts in its channel's window until answered
        (the caller waited for room first: ``wait_for_room``)."""
        ctx = self.sender()
        if ctx.sender_id in self.ephemeral and actor_id != ctx.sender_id:
            raise ActorRTError(f"an ephemeral actor (ft='ephemeral') calls no actor: it keeps no state, so after a "
                               f"failure it could not tell which of its calls were made (it called {method}); give "
                               f"it ft='checkpoint' or 'lineage_stash'")
        task = context.running_task.get(None)
        interruptions.may_send(task)
        encoded = encode_args(args, kwargs, self._inline_max_bytes(), to_shared=task is None or not task.replayed)
        self._wait_for_stash_room()
        with ctx.lock:
            spec = build_task(ctx, actor_id, method, encoded.args, encoded.refs, self.address)
            if bounded:
                self.windows.opened((ctx.sender_id, actor_id), spec.task_id)
            return self._submit(spec, slot, encoded)

    def bounds(self, actor_id: bytes, limit: int | None) -> bool:
        """Whether a call to ``actor_id`` from the running sender counts against ``limit``: not
        an actor's call to itself, which its running task (counted) would wait for forever."""
        return limit is not None and self.sender().sender_id != actor_id

    def wait_for_room(self, actor_id: bytes, limit: int, what: str) -> None:
        """A driver thread blocks until it has fewer than ``limit`` calls in flight to ``actor_id``.
        Inside an actor a wait would block the event loop: ``what`` is the call, for the error.
        (Driver threads that pass the wait together may each send one call: a window per thread
        would be exact, but a driver's threads share one channel.)"""
        if self._on_loop_thread():  # always, so that a replay raises where the lost run did
            raise ActorRTError(f"{what}.remote() on a handle with max_in_flight={limit} would have to block the "
                               f"event loop when the channel is full: inside an actor, use `await "
                               f"{what}.remote_async(...)`, which waits for room")
        self.windows.wait_blocking((self.sender().sender_id, actor_id), limit)

    async def room(self, actor_id: bytes, limit: int) -> None:
        """Await until the running sender has fewer than ``limit`` calls in flight to ``actor_id``.
        A replay waits too, where the lost run did: its calls that survivors ran are deferred, and
        count as answered at once, so only what it sends again is held back."""
        channel = (self.sender().sender_id, actor_id)
        if self._on_loop_thread():
            await self.windows.wait(channel, limit)
        else:  # a driver awaiting in a loop of its own
            await asyncio.to_thread(self.windows.wait_blocking, channel, limit)

    def submit_function(self, blob: bytes, name: str, node: int | None, args: Sequence[Any],
                        kwargs: dict[str, Any]) -> ObjectRef:
        """Submit a call of the remote function ``blob`` (cloudpickled) to ``node``, or to the next
        live node; returns the ref to its result. Placement is not logged: a replayed caller may
        send the call elsewhere, which runs it again (a function keeps no state)."""
        interruptions.may_send(context.running_task.get(None))
        encoded = encode_args(args, kwargs, self._inline_max_bytes())
        self._wait_for_stash_room()
        ctx = self.sender()
        with ctx.lock:
            slot = self._place_call(node, ctx.counters.get(ids.FUNCTIONS, 0) + 1)
            spec = build_task(ctx, ids.FUNCTIONS, name, encoded.args, encoded.refs, self.address, function=blob)
            return self._submit(spec, slot, encoded)

    def _submit(self, spec: pb.TaskSpec, slot: int, encoded: EncodedArgs) -> ObjectRef:
        # An await of the ref waits for the receiver (for a function, for this very call).
        producer = ids.function_call(spec.task_id) if spec.function else spec.receiver
        ref = ObjectRef(ids.object_id(spec.task_id), self.address, producer, owned=True, owner_actor=spec.sender)
        self._send(spec, slot, encoded)
        return ref

    def _send(self, spec: pb.TaskSpec, slot: int, encoded: EncodedArgs) -> None:
        large = attach_large_args(spec, encoded.large, self.address)
        self.built += 1
        task = context.running_task.get(None)
        if task is not None:
            interruptions.sent_one(task)
            ctx = self.sender()
            if ctx.on_call is not None and spec.receiver != ctx.sender_id:
                ctx.on_call()  # (before it leaves: core/checkpointer.py, took_from)
        # A replay's receivers have most of what it sends: its large arguments are not pushed beside
        # its tasks (a receiver that needs one fetches it from here).
        self._hand_off(spec, slot, encoded.refs, large, task is None or not task.replayed)

    def create_actor(self, creation: pb.ActorCreation, args: Sequence[Any], kwargs: dict[str, Any],
                     node: int | None, before_send: Callable[[bytes, int], None] = lambda actor_id, slot: None,
                     ) -> tuple[bytes, int, ObjectRef]:
        """Place and create an actor; returns its (actor id, slot, the ref to its creation's
        result, for its handle). Tasks go to whichever incarnation of the slot is alive: a
        restarted one rebuilds the actor. ``before_send(actor id, slot)`` runs before the creation
        task is sent; if it raises, nothing is sent."""
        ctx = self.sender()
        interruptions.may_send(context.running_task.get(None))
        encoded = encode_args(args, kwargs, self._inline_max_bytes())
        with ctx.lock:
            actor_id = ctx.next_actor_id()
            slot = self._place(node, actor_id, ctx)
            creation.slot = slot
            before_send(actor_id, slot)
            ref = self._submit(build_task(ctx, actor_id, "__init__", encoded.args, encoded.refs, self.address,
                                          creation), slot, encoded)
        return actor_id, slot, ref

    def _inline_max_bytes(self) -> int:
        return self.ft.options.inline_max_bytes if self.ft is not None else DEFAULT_INLINE_MAX_BYTES

    def _wait_for_stash_room(self) -> None:
        """Back-pressure for driver threads (actors wait in their runner instead).

        Counts the submissions still queued for the loop too, so a fast thread cannot overshoot
        the bound before the loop has stashed what it sent.
        """
        ft = self.ft
        if ft is None or self._on_loop_thread():
            return
        deadline = None
        while not ft.has_room(self.built - self.handled):
            now = time.monotonic()
            if deadline is None:
                deadline = now + STASH_FULL_TIMEOUT_S
            elif now > deadline:
                raise ClusterError(
                    f"the lineage stash of this process is full ({ft.options.stash_limit} specs, stash_limit) and the "
                    f"lineage store has not committed any of them for {STASH_FULL_TIMEOUT_S:.0f} s: is the store "
                    f"reachable? Nothing was submitted; call again once it is (or raise stash_limit)")
            time.sleep(0.002)

    def _place(self, node: int | None, actor_id: bytes, ctx: SenderContext) -> int:
        """The slot for a new actor: ``node``, or the next live one. Inside an actor task the
        choice is logged in the task's application log, so a replay places the actor where the
        lost run did, whichever nodes are alive then (its tasks follow the slot to whoever serves
        it). A slot restarting, or inherited by a live node, is served; a dead one alone is not.

        A remote function logs nothing (it is run again, not replayed): it places by the actor's
        ID, which a re-run derives again, so the re-run's creation reaches the same actor."""
        if node is not None:
            return self._live(node)
        if ctx.function:
            return self._live(self._membership.slot_by_hash(actor_id))
        return context.record(lambda: self.next_live_slot(ctx.actors_created, "place the actor on"),
                              self.ft.on_record)

    def _place_call(self, node: int | None, counter: int) -> int:
        """The slot for a function call: ``node``, or the live nodes in turn."""
        return self.next_live_slot(counter, "run the function on") if node is None else self._live(node)

    def _live(self, node: int) -> int:
        if not self._membership.accepts(node):
            known = ", ".join(str(n.slot) for n in self._membership.alive_nodes()) or "none"
            raise ClusterError(f"node {node} is not a live node (live nodes: {known})")
        return node

    def next_live_slot(self, counter: int, what: str) -> int:
        """The ``counter``-th of the live nodes, in turn; ``what`` it is for, for the error."""
        alive = self._membership.alive_nodes()
        if not alive:
            raise ClusterError(f"no live node to {what}")
        return alive[counter % len(alive)].slot

