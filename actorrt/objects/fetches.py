"""Objects that move between processes: fetched by borrowers, answered by their owners.

A process that needs an object it does not hold asks the object's owner for it where the owner is
now (the view says: the same process, the restarted incarnation of its slot, or the slot's heir)
and asks again wherever the owner goes while the answer is outstanding. A fetched copy is
*borrowed*: kept while tasks use it and dropped after. An owner answers a fetch once it holds the
value, waiting for its own recovery when a replay is still to make the value again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from google.protobuf.message import Message

from actorrt.lineage import ids
from actorrt.net.peer_streams import FETCH, LINEAGE, OBJECT
from actorrt.objects.store import ObjectStore
from actorrt.rpc import common_pb2 as pb
from actorrt.rpc import node_pb2

if TYPE_CHECKING:
    from actorrt.core.membership import Membership

# A fetch whose stream to the owner broke is sent again after this long (the head's view of the
# owner's fate arrives meanwhile; sending at once would only reconnect to a dead process).
REFETCH_DELAY_S = 0.2

Send = Callable[[str, int, Message], None]
Spawn = Callable[[Coroutine[Any, Any, Any]], asyncio.Task]
Pin = Callable[[bytes, bytes, bytes, int], None]  # (object, receiver, sender, counter)
NeededBy = tuple[bytes, bytes, int]  # the task a fetched argument is for: (receiver, sender, counter)


def lost(object_id: bytes, message: str) -> pb.ObjectValue:
    return pb.ObjectValue(object_id=object_id, error=pb.RemoteError(kind=pb.OBJECT_LOST, message=message))


class Fetches:
    def __init__(self, objects: ObjectStore, membership: Membership, send: Send, spawn: Spawn,
                 is_pending: Callable[[bytes], bool], recovered: asyncio.Event, pin: Pin,
                 lineage_of: Callable[[bytes, str], list[pb.TaskSpec]]) -> None:
        self.address = ""  # this process's, once it serves
        self._objects = objects
        self._membership = membership
        self._send = send
        self._spawn = spawn
        self._is_pending = is_pending  # whether a task this process submitted awaits its result
        self._recovered = recovered
        self._pin = pin  # an owner keeps what a receiver's replay may fetch again
        self._lineage_of = lineage_of  # (producing task, destination) -> its uncommitted lineage
        self._named: dict[bytes, tuple[str, bytes]] = {}  # object id -> the owner its ref names: address, actor
        self._needed_by: dict[bytes, NeededBy] = {}  # object id -> the task a fetch is for
        self._asked: dict[bytes, str] = {}  # object id -> the process asked ("" = waiting)
        self._borrowed: dict[bytes, int] = {}  # fetched object id -> tasks using it
        # A value came by fetch: from its owner, made maybe by another actor's task. The rollback
        # frontier does not see that dependency (only calls and their answers), so such a
        # process's failures take every node back (ft="checkpoint").
        self.took_fetched = False

    # ---- borrowing --------------------------------------------------------------------------

    async def resolve(self, ref: pb.ObjectRefProto, needed_by: NeededBy | None = None) -> pb.ObjectValue:
        """The wire value of ``ref``, fetched from its owner if this process does not hold it.
        ``needed_by``: the task it is an argument of, which its owner then keeps it for."""
        object_id = ref.object_id
        if object_id not in self._objects and ref.owner_address == self.address:
            return lost(object_id, f"object {ids.short(object_id)} was released by its owner")
        if object_id not in self._objects:
            self._fetch(ref, needed_by)
        elif (needed_by is not None and object_id in self._borrowed and self._needed_by.get(object_id) != needed_by
              and ids.producer_task(object_id) != ids.task_id(*needed_by)):
            # A copy fetched for another task: its owner keeps it for this one too. (Not an argument
            # that came beside this very task: its sender keeps that one for it.)
            self._keep_for(ref, needed_by)
        fut = self._objects.expect(object_id)
        if object_id in self._borrowed:
            self._borrowed[object_id] += 1
        return await asyncio.shield(fut)

    def prefetch(self, ref: pb.ObjectRefProto, needed_by: NeededBy) -> None:
        """Start fetching ``ref`` for a task that runs later (a replay): its ``resolve`` then finds
        it here or on its way, instead of asking its owner once the task is due."""
        if ref.object_id not in self._objects and ref.owner_address != self.address:
            self._fetch(ref, needed_by)

    def _fetch(self, ref: pb.ObjectRefProto, needed_by: NeededBy | None) -> None:
        """Ask ``ref``'s owner for its value; the copy is borrowed (by no task yet)."""
        object_id = ref.object_id
        self._borrowed[object_id] = 0
        self._named[object_id] = (ref.owner_address, ref.owner_actor)
        if needed_by is not None:
            self._needed_by[object_id] = needed_by
        self._objects.expect(object_id)
        self._route(object_id)

    def _keep_for(self, ref: pb.ObjectRefProto, needed_by: NeededBy) -> None:
        owner = self._membership.current_owner(ref.owner_address, ref.owner_actor)
        if owner and owner != self.address:
            receiver, sender, counter = needed_by
            self._send(owner, FETCH, node_pb2.ObjectRequest(object_id=ref.object_id, receiver=receiver, sender=sender,
                                                            task_counter=counter, keep_only=True))

    def unborrow(self, object_id: bytes) -> None:
        """A task is done with a fetched object; drop the copy when no task uses it."""
        n = self._borrowed.get(object_id)
        if n is None:
            return
        if n <= 1:
            del self._borrowed[object_id]
            self._objects.release(object_id)
        else:
            self._borrowed[object_id] = n - 1

    def on_object(self, value: pb.ObjectValue) -> None:
        """An owner answered a fetch."""
        self.took_fetched = True
        self._named.pop(value.object_id, None)
        self._asked.pop(value.object_id, None)
        self._needed_by.pop(value.object_id, None)
        self._objects.put(value)

    def on_push(self, value: pb.ObjectValue) -> None:
        """An argument arrived beside its task: held like a fetched copy, until the task is done."""
        self._objects.expect(value.object_id)
        if self._objects.put(value):
            self._borrowed.setdefault(value.object_id, 0)

    def drop_unused(self, spec: pb.TaskSpec) -> None:
        """``spec`` will not run (a re-send, a dead or unknown actor): drop the copies of its
        arguments that came beside it and that no task uses."""
        for arg in spec.args:
            if arg.HasField("ref") and self._borrowed.get(arg.ref.object_id) == 0:
                del self._borrowed[arg.ref.object_id]
                self._objects.release(arg.ref.object_id)

    def reroute(self) -> None:
        """The view changed: ask again wherever an owner went."""
        for object_id in list(self._named):
            self._route(object_id)

    def on_peer_lost(self, peer: str) -> None:
        """Fetches from a dead process wait for the view that says so: its restarted incarnation
        owns the object again after its replay. Asked again a little later: by then the view says
        where the object's owner is."""
        for object_id, asked in list(self._asked.items()):
            if asked == peer:
                self.ask_again(object_id)

    def ask_again(self, object_id: bytes) -> None:
        """The answer did not come whole (its holder died while its bytes were pulled): ask again
        a little later, wherever the owner is then."""
        if object_id in self._named:
            self._asked[object_id] = ""
            asyncio.get_running_loop().call_later(REFETCH_DELAY_S, self._refetch, object_id)

    def fetch_instead(self, object_id: bytes, owner: str) -> None:
        """An argument sent beside its task cannot be read (its sender died): ask its owner,
        ``owner`` or whichever process serves its slot now, like any fetched argument."""
        if object_id in self._named or self._objects.held(object_id) is not None:
            return
        self._borrowed.setdefault(object_id, 0)
        self._named[object_id] = (owner, b"")
        self._objects.expect(object_id)
        self._route(object_id)

    def expect_push(self, object_id: bytes) -> None:
        """An argument is on its way beside its task (its bytes are being pulled): its task waits
        for it here instead of fetching it."""
        if not self._objects.expect(object_id).done():
            self._borrowed.setdefault(object_id, 0)

    def _refetch(self, object_id: bytes) -> None:
        if object_id in self._named and self._asked.get(object_id) == "":
            self._route(object_id)

    def _route(self, object_id: bytes) -> None:
        """Ask the owner of a fetched object where it is now, unless asked there already."""
        named = self._named[object_id]
        owner = self._membership.current_owner(*named)
        asked = self._asked.get(object_id)
        if owner is None:
            del self._named[object_id]
            self._asked.pop(object_id, None)
            self._needed_by.pop(object_id, None)
            self._objects.put(lost(object_id, f"the owner of object {ids.short(object_id)} ({named[0]}) went away"))
        elif owner != asked:
            self._asked[object_id] = owner
            if owner == self.address:
                self._borrowed.pop(object_id, None)  # this process owns it again: not a borrowed copy
                self._spawn(self._answer_local(object_id))
            elif owner:
                receiver, sender, counter = self._needed_by.get(object_id, (b"", b"", 0))
                self._send(owner, FETCH, node_pb2.ObjectRequest(object_id=object_id, receiver=receiver, sender=sender,
                                                                task_counter=counter))

    async def _answer_local(self, object_id: bytes) -> None:
        """A ref named this node slot's previous incarnation: the replay submits the task that
        makes its value again, unless the previous incarnation had released it."""
        rebuilt = await self._rebuilt(lambda: self._is_pending(ids.producer_task(object_id))
                                      or self._objects.expect(object_id).done())
        self._named.pop(object_id, None)
        self._asked.pop(object_id, None)
        self._needed_by.pop(object_id, None)
        if not rebuilt:
            self._objects.put(lost(object_id, f"object {ids.short(object_id)} was released by its owner before "
                                              f"it failed"))

    def fail_all(self, reason: str) -> None:
        for object_id in self._named:
            self._objects.put(lost(object_id, reason))
        self._named.clear()
        self._asked.clear()
        self._needed_by.clear()

    # ---- owning -----------------------------------------------------------------------------

    async def answer(self, peer: str, request: node_pb2.ObjectRequest) -> None:
        """A peer asked for an object this process owns (for a task: keep it for that task's replays)."""
        if request.keep_only:
            if request.object_id in self._objects:
                self._pin(request.object_id, request.receiver, request.sender, request.task_counter)
            return
        value = await self._owned_value(request.object_id)
        if request.receiver and value.WhichOneof("kind") == "value":
            self._pin(request.object_id, request.receiver, request.sender, request.task_counter)
        for ancestor in self._lineage_of(ids.producer_task(request.object_id), peer):  # ahead, as for a result
            self._send(peer, LINEAGE, ancestor)
        self._send(peer, OBJECT, value)

    async def _rebuilt(self, present: Callable[[], bool]) -> bool:
        """Whether ``present()`` holds, waiting for it while this process recovers (a replay may
        submit the task that makes an object again at any point, and may itself wait for it)."""
        while not present():
            if self._recovered.is_set():
                return False
            await asyncio.sleep(0.005)
        return True

    async def _owned_value(self, object_id: bytes) -> pb.ObjectValue:
        if await self._rebuilt(lambda: object_id in self._objects):
            return await asyncio.shield(self._objects.expect(object_id))
        return lost(object_id, f"object {ids.short(object_id)} is not held by its owner {self.address}")
