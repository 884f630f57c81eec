"""The cluster view as one process knows it: which node incarnation serves each slot now.

The head publishes a ``ClusterView`` whenever membership changes; every process keeps the newest
one here and asks it where to send a task (the slot, the restarted incarnation of it, or the live
slot that inherited a dead one's actors) and where an object a ref names lives now.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from actorrt.exceptions import ClusterError
from actorrt.rpc import head_pb2


class Membership:
    def __init__(self) -> None:
        self.view = head_pb2.ClusterView()
        self._nodes: dict[int, head_pb2.NodeInfo] = {}
        self._incarnations: dict[str, int] = {}  # every node process address seen -> its slot
        self._drivers_seen: set[str] = set()  # every driver address seen in a view
        self.moved: dict[bytes, head_pb2.ActorMove] = {}  # actors their standbys serve now
        self._changed = asyncio.Event()
        self._listeners: list[Callable[[], None]] = []

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after each newer view is acted on (a library tracking its peers)."""
        self._listeners.append(listener)

    @property
    def revision(self) -> int:
        return self.view.revision

    def apply(self, view: head_pb2.ClusterView) -> list[str] | None:
        """Take ``view`` if it is not older; returns the addresses of the node incarnations it ends
        (dead or replaced), or None if ``view`` is older than the one held."""
        if view.revision < self.view.revision:
            return None
        old = self._nodes
        self.view = view
        self._nodes = {n.slot: n for n in view.nodes}
        # Former addresses first: a port a dead process used may serve another slot's process now.
        self._incarnations.update((a, n.slot) for n in view.nodes for a in n.former_addresses)
        self._incarnations.update((n.address, n.slot) for n in view.nodes if n.address)
        self._drivers_seen.update(view.drivers)
        self.moved = {m.actor: m for m in view.moved_actors}
        gone = []
        for slot, info in old.items():
            new = self._nodes.get(slot)
            if info.address and (new is None or new.epoch != info.epoch or new.state != head_pb2.ALIVE):
                gone.append(info.address)
        return gone

    def notify(self) -> None:
        """Wake whoever waits for a view (after the caller acted on the new one)."""
        self._changed.set()
        self._changed = asyncio.Event()
        for listener in self._listeners:
            listener()

    async def wait(self, predicate: Callable[[Membership], bool], timeout: float) -> None:
        """Wait until ``predicate(self)`` holds for the current view."""
        async with asyncio.timeout(timeout):
            while not predicate(self):
                await self._changed.wait()

    def alive_nodes(self) -> list[head_pb2.NodeInfo]:
        return sorted((n for n in self._nodes.values() if n.state == head_pb2.ALIVE), key=lambda n: n.slot)

    def node(self, slot: int) -> head_pb2.NodeInfo | None:
        return self._nodes.get(slot)

    def incarnation_alive(self, slot: int, epoch: int) -> bool:
        info = self._nodes.get(slot)
        return info is not None and info.epoch == epoch and info.state == head_pb2.ALIVE

    def slot_for(self, actor_id: bytes, slot: int) -> int:
        """The slot serving actor ``actor_id``, placed on ``slot``: its standby's, once it took the
        actor's place (``ClusterView.moved_actors``)."""
        move = self.moved.get(actor_id)
        return slot if move is None else move.slot

    def serving(self, slot: int) -> head_pb2.NodeInfo | None:
        """The node serving ``slot``'s actors: the slot itself, or, for a slot that will not come
        back, the live slot that inherited them (following inheritances of inheritances)."""
        info = self._nodes.get(slot)
        for _ in range(len(self._nodes)):  # bounded, whatever the view says
            if info is None or not info.HasField("heir"):
                break
            info = self._nodes.get(info.heir)
        return info

    def slot_by_hash(self, key: bytes) -> int:
        """A slot chosen by ``key`` alone among every slot this view names, dead ones included
        (their actors are served by a restart or an heir): the same slot for the same key in any
        process, while no node joins the cluster."""
        slots = sorted(self._nodes)
        if not slots:
            raise ClusterError("no node in the cluster view to place the actor on")
        return slots[int.from_bytes(key[:8], "big") % len(slots)]

    def accepts(self, slot: int) -> bool:
        """Whether tasks for ``slot`` have somewhere to go: a live node serves it, or the head is
        restarting the slot. A dead slot that nobody inherited accepts none."""
        info = self.serving(slot)
        return info is not None and (info.state == head_pb2.ALIVE or info.managed)

    def incarnation_gone(self, address: str) -> bool:
        """Whether ``address`` was a node process that the view has ended (dead or replaced)."""
        slot = self._incarnations.get(address)
        if slot is None:
            return False
        info = self._nodes.get(slot)
        return info is None or info.address != address or info.state != head_pb2.ALIVE

    def current_owner(self, owner: str, actor: bytes = b"") -> str | None:
        """Where the object a ref names with owner ``owner`` (made by a task of ``actor``, if
        given) is now: that process, the node now serving its slot (which rebuilt it) or serving
        the actor (its standby took its place), "" while the slot restarts, or None if it is gone
        for good (a driver, or a slot that will not come back and that no node inherited)."""
        move = self.moved.get(actor) if actor else None
        slot = move.slot if move is not None else self._incarnations.get(owner)
        if slot is None:  # a driver, or a process this one has not seen in a view yet
            if owner in self.view.drivers:
                return owner
            gone = owner in self.view.departed_drivers or owner in self._drivers_seen
            return None if gone else owner
        info = self.serving(slot)
        if info is not None and info.state == head_pb2.ALIVE:
            return info.address
        return "" if info is not None and info.managed else None
