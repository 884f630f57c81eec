"""Standby actors: the checkpoints a node keeps loaded for actors elsewhere, and where the actors
it hosts keep theirs.

An actor created with ``standby=1`` has a passive replica on another node, never on its own (on
another host where there is one). Its node writes where in the store (the head reads it when the
node fails, ``cluster/promotions.py``). The standby's node reads each checkpoint file and restores
the actor's state from it in a thread, so that taking the actor's place costs no read and no
unpickling: only the replay of the tasks after that checkpoint.

How far behind a standby may fall: one checkpoint. A new checkpoint is told to the standby first
(``to_standby``); the actor's node waits until the standby says it has loaded it (or
``HAND_OVER_TIMEOUT_S``), marks it announced in the store, and only then tells every process,
which may then drop what a replay from the previous checkpoint would need. So a promotion may
replay from the copy it holds if that copy is no older than the store's announced checkpoint: a
standby called while it loads the newest checkpoint takes its copy of the previous one and
replays a little more. A copy older than that (a new standby's, or one whose load failed or timed
out) is not used: the promotion waits for a load under way, or reads the file as a restart would.
When a standby's node dies, the actor's node chooses another one, hands it its newest checkpoint,
and announces a checkpoint it was handing to the dead one without waiting for it.
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
from actorrt.net.peer_streams import CHECKPOINTED, STANDBY_LOADED
from actorrt.rpc import checkpoint_pb2, head_pb2, node_pb2
from actorrt.store.clients import until_reachable
from actorrt.store.lineage_store import Pointer
from actorrt.util import pickling

if TYPE_CHECKING:
    from actorrt.core.actor import ActorInstance
    from actorrt.core.worker import Worker

log = logging.getLogger(__name__)

# How long a checkpoint waits for its actor's standby to load it before every process hears of it.
HAND_OVER_TIMEOUT_S = 30.0

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


async def _load(path: str) -> Loaded:
    """The checkpoint in file ``path`` and the instance restored from it: the file read and the
    state unpickled in a thread, the class loaded on the loop (an import in a thread while the
    loop imports the same modules, say for a creation, can deadlock on Python's module locks)."""
    checkpoint = await asyncio.to_thread(read_checkpoint, path)
    pickling.loads(checkpoint.creation.class_blob)
    instance = await asyncio.to_thread(restore_state, checkpoint.creation, checkpoint.state)
    checkpoint.ClearField("state")  # held once, as the instance
    return checkpoint, instance


@dataclass
class _Copy:
    """What this node keeps for one actor elsewhere."""

    primary: str  # the process hosting the actor: told what was loaded
    wanted: tuple[int, str]  # the newest checkpoint announced: (seq, path)
    loaded: tuple[int, str, Loaded] | None = None  # (seq, path, what was loaded)
    loader: asyncio.Task | None = None


class Standbys:
    def __init__(self, worker: Worker) -> None:
        self._w = worker
        self._copies: dict[bytes, _Copy] = {}  # this node is the standby of these actors
        self._handed: dict[tuple[bytes, int], asyncio.Future] = {}  # (actor here, seq) -> its standby loaded it

    # ---- the standby's side -------------------------------------------------------------------

    def on_checkpointed(self, done: node_pb2.Checkpointed, peer: str) -> None:
        """An actor on process ``peer`` checkpointed: load it if this node keeps its standby, forget
        it if another does."""
        if not done.path:
            return
        if not done.HasField("standby") or done.standby != self._w.slot:
            self._copies.pop(done.actor, None)
            return
        copy = self._copies.get(done.actor)
        if copy is None:
            copy = self._copies[done.actor] = _Copy(peer, (0, ""))
        copy.primary = peer
        if done.seq > copy.wanted[0]:
            copy.wanted = (done.seq, done.path)
        if copy.loaded is not None and copy.loaded[0] >= done.seq:
            self._w.router.send(peer, STANDBY_LOADED, node_pb2.StandbyLoaded(actor=done.actor, seq=copy.loaded[0]))
        elif copy.loader is None or copy.loader.done():
            copy.loader = self._w.spawn(self._load_newest(done.actor, copy))

    async def _load_newest(self, actor_id: bytes, copy: _Copy) -> None:
        """Load the newest checkpoint announced, again while a newer one came during a load."""
        while copy.loaded is None or copy.loaded[0] < copy.wanted[0]:
            seq, path = copy.wanted
            try:
                loaded = await _load(path)
            except Exception as exc:  # noqa: BLE001 - an unreadable file or a user restore(): a promotion reads it again
                log.warning("standby of actor %s: checkpoint %d not loaded: %r", ids.short(actor_id), seq, exc)
                if copy.wanted[0] == seq:  # (else a newer one came meanwhile: that one)
                    self._w.router.send(copy.primary, STANDBY_LOADED,
                                        node_pb2.StandbyLoaded(actor=actor_id, seq=seq, failed=True))
                    return
                continue
            copy.loaded = (seq, path, loaded)
            self._w.router.send(copy.primary, STANDBY_LOADED, node_pb2.StandbyLoaded(actor=actor_id, seq=seq))

    async def take(self, actor_id: bytes, pointer: Pointer) -> tuple[int, str, Loaded] | None:
        """This node's copy of ``actor_id``, if a replay may start from it: no older than the
        checkpoint ``pointer`` says was announced (awaiting a load under way if need be); given up
        to the actor now taking its place here. None if there is no such copy."""
        copy = self._copies.pop(actor_id, None)
        if copy is None:
            return None

        def usable() -> bool:
            return copy.loaded is not None and pointer.announced <= copy.loaded[0] <= pointer.seq

        if not usable() and copy.loader is not None and pointer.announced <= copy.wanted[0] <= pointer.seq:
            await asyncio.wait([copy.loader])
        return copy.loaded if usable() else None

    def loaded(self) -> dict[str, int]:
        """The checkpoint each copy here holds loaded, by actor ID (hex)."""
        return {actor.hex(): copy.loaded[0] for actor, copy in self._copies.items() if copy.loaded is not None}

    # ---- the actors' side ---------------------------------------------------------------------

    async def hand_over(self, done: node_pb2.Checkpointed) -> None:
        """Tell ``done`` (a checkpoint of an actor here) to its standby alone, and wait until the
        standby has loaded it (at most ``HAND_OVER_TIMEOUT_S``)."""
        address = self._address_of(done.standby)
        if not address:
            return
        key = (done.actor, done.seq)
        loaded = self._handed[key] = asyncio.get_running_loop().create_future()
        try:
            self._w.router.send(address, CHECKPOINTED, _for_standby(done, done.standby))
            await asyncio.wait_for(loaded, HAND_OVER_TIMEOUT_S)
        except TimeoutError:
            log.warning("the standby of actor %s on node %d did not load checkpoint %d in %.0f s: it will wait for "
                        "a load, or read the file, if it is promoted", ids.short(done.actor), done.standby, done.seq,
                        HAND_OVER_TIMEOUT_S)
        finally:
            del self._handed[key]

    def on_loaded(self, notice: node_pb2.StandbyLoaded) -> None:
        """The standby of an actor here loaded a checkpoint, or could not: the hand-over is over."""
        self._handed_over(notice.actor, notice.seq)

    def _handed_over(self, actor_id: bytes, upto: int) -> None:
        for (actor, seq), loaded in self._handed.items():
            if actor == actor_id and seq <= upto and not loaded.done():
                loaded.set_result(None)

    def _address_of(self, slot: int) -> str:
        return next((n.address for n in self._w.membership.alive_nodes() if n.slot == slot), "")

    def place(self, actor: ActorInstance) -> None:
        """Keep ``actor`` (hosted here, created with a standby) a standby on a live node: the one
        it has, or a new one, told where in the store and handed its newest checkpoint."""
        w = self._w
        if not actor.creation.standby or actor.death is not None or not w.ft.logs_lineage:
            return
        alive = w.membership.alive_nodes()
        standby = choose_standby(actor.actor_id, w.slot, w.shared.host if w.shared else "", alive, actor.standby)
        if standby == actor.standby:
            return
        actor.standby = standby
        self._handed_over(actor.actor_id, actor.checkpointer.seq)  # not to the one that is gone
        if standby is not None:
            log.info("actor %s keeps its standby on node %d", actor.who, standby)
        w.spawn(until_reachable(f"recording the standby of actor {actor.who}", w.ft.store.set_standby,
                                w.slot, actor.actor_id, standby))
        announced = actor.checkpointer.announced
        address = self._address_of(standby) if standby is not None else ""
        if announced is not None and address:
            w.router.send(address, CHECKPOINTED, _for_standby(announced, standby))

    def on_view(self) -> None:
        """A new view: actors whose standby's node is gone choose another."""
        for actor in list(self._w.host.actors.values()):
            self.place(actor)


def _for_standby(done: node_pb2.Checkpointed, standby: int) -> node_pb2.Checkpointed:
    """``done`` as told to the standby on ``standby`` alone."""
    return node_pb2.Checkpointed(actor=done.actor, seq=done.seq, path=done.path, standby=standby, to_standby=True)
