"""Standby actors: the checkpoints a node keeps loaded for actors elsewhere, and where the actors
it hosts keep theirs.

An actor created with ``standby=1`` has a passive replica on another node, never on its own (on
another host where there is one). Its node writes where in the store (the head reads it when the
node fails, ``cluster/promotions.py``) and names the standby in every checkpoint announcement; the
standby's node then reads the checkpoint file and restores the actor's state from it in a thread,
so that taking the actor's place costs no read and no unpickling: only the replay of the tasks
after that checkpoint. A standby holds one copy, the newest it has loaded; it is as far behind as
the actor's last checkpoint (``checkpoint_every``) plus the time to load it.

A standby called while it loads the checkpoint the store points at waits for that load; one that
holds an older copy, or none, reads the file as a restart would (an older checkpoint is not used:
the callers of the actor dropped what a replay from it would need once the newer one was
announced). When a standby's node dies, the actor's node chooses another one and sends it the
announcement of its newest checkpoint.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from actorrt.lineage import ids
from actorrt.lineage.checkpoints import read_checkpoint, restore_state
from actorrt.net.peer_streams import CHECKPOINTED
from actorrt.rpc import checkpoint_pb2, head_pb2, node_pb2
from actorrt.store.clients import until_reachable

if TYPE_CHECKING:
    from actorrt.core.actor import ActorInstance
    from actorrt.core.worker import Worker

log = logging.getLogger(__name__)

Loaded = tuple[checkpoint_pb2.ActorCheckpoint, Any]  # a checkpoint (its state cleared) and the instance restored


def choose_standby(actor_id: bytes, slot: int, host_id: str, alive: Sequence[head_pb2.NodeInfo],
                   current: int | None) -> int | None:
    """The slot for the standby of ``actor_id``, hosted on ``slot`` (on host ``host_id``): its
    ``current`` one while that is alive, else a live slot on another host if there is one, else
    any other live slot (spread by the actor's ID); None if no other slot lives."""
    others = [n for n in alive if n.slot != slot]
    if current is not None and any(n.slot == current for n in others):
        return current
    elsewhere = [n for n in others if n.host_id != host_id] or others
    return elsewhere[zlib.crc32(actor_id) % len(elsewhere)].slot if elsewhere else None


def _load(path: str) -> Loaded:
    checkpoint = read_checkpoint(path)
    instance = restore_state(checkpoint.creation, checkpoint.state)
    checkpoint.ClearField("state")  # held once, as the instance
    return checkpoint, instance


@dataclass
class _Copy:
    """What this node keeps for one actor elsewhere."""

    wanted: tuple[int, str]  # the newest checkpoint announced: (seq, path)
    loaded: tuple[int, Loaded] | None = None
    loader: asyncio.Task | None = None


class Standbys:
    def __init__(self, worker: Worker) -> None:
        self._w = worker
        self._copies: dict[bytes, _Copy] = {}  # this node is the standby of these actors

    # ---- the standby's side -------------------------------------------------------------------

    def on_checkpointed(self, done: node_pb2.Checkpointed) -> None:
        """An actor checkpointed: load it if this node keeps its standby, forget it if another does."""
        if not done.path:
            return
        if not done.HasField("standby") or done.standby != self._w.slot:
            self._copies.pop(done.actor, None)
            return
        copy = self._copies.setdefault(done.actor, _Copy((0, "")))
        if done.seq > copy.wanted[0]:
            copy.wanted = (done.seq, done.path)
        if copy.loader is None or copy.loader.done():
            copy.loader = self._w.spawn(self._load_newest(done.actor, copy))

    async def _load_newest(self, actor_id: bytes, copy: _Copy) -> None:
        """Load the newest checkpoint announced, again while a newer one came during a load."""
        while copy.loaded is None or copy.loaded[0] < copy.wanted[0]:
            seq, path = copy.wanted
            try:
                loaded = await asyncio.to_thread(_load, path)
            except Exception as exc:  # noqa: BLE001 - an unreadable file or a user restore(): a promotion reads it again
                log.warning("standby of actor %s: checkpoint %d not loaded: %r", ids.short(actor_id), seq, exc)
                return
            copy.loaded = (seq, loaded)

    async def take(self, actor_id: bytes, seq: int) -> Loaded | None:
        """This node's copy of ``actor_id`` at checkpoint ``seq`` (awaiting its load if it is under
        way), given up to the actor now taking its place here; None if there is no such copy."""
        copy = self._copies.pop(actor_id, None)
        if copy is None:
            return None
        if (copy.loaded is None or copy.loaded[0] < seq) and copy.wanted[0] == seq and copy.loader is not None:
            await asyncio.wait([copy.loader])
        if copy.loaded is not None and copy.loaded[0] == seq:
            return copy.loaded[1]
        return None

    def loaded(self) -> dict[str, int]:
        """The checkpoint each copy here holds loaded, by actor ID (hex)."""
        return {actor.hex(): copy.loaded[0] for actor, copy in self._copies.items() if copy.loaded is not None}

    # ---- the actors' side ---------------------------------------------------------------------

    def place(self, actor: ActorInstance) -> None:
        """Keep ``actor`` (hosted here, created with a standby) a standby on a live node: the one
        it has, or a new one, told where in the store and sent its newest checkpoint."""
        w = self._w
        if not actor.creation.standby or actor.death is not None or not w.ft.logs_lineage:
            return
        alive = w.membership.alive_nodes()
        standby = choose_standby(actor.actor_id, w.slot, w.shared.host if w.shared else "", alive, actor.standby)
        if standby == actor.standby:
            return
        actor.standby = standby
        if standby is not None:
            log.info("actor %s keeps its standby on node %d", actor.who, standby)
        w.spawn(until_reachable(f"recording the standby of actor {actor.who}", w.ft.store.set_standby,
                                w.slot, actor.actor_id, standby))
        announced = actor.checkpointer.announced
        address = next((n.address for n in alive if n.slot == standby), "")
        if announced is not None and address:
            again = node_pb2.Checkpointed()
            again.CopyFrom(announced)
            again.standby = standby
            w.router.send(address, CHECKPOINTED, again)

    def on_view(self) -> None:
        """A new view: actors whose standby's node is gone choose another."""
        for actor in list(self._w.host.actors.values()):
            self.place(actor)
