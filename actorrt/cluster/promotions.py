"""Which standby actors take their actor's place when a node fails (the Clonos design, on replay).

An actor created with ``standby=1`` keeps a passive replica on another node: its node tells the
store where (``LineageStore.set_standby``), and ships each checkpoint there as it completes. When
the actor's node fails, the head moves the actor to its standby's slot in the view it publishes
with the failure, before it restarts the slot. The standby's node replays only the tail since the
checkpoint it holds, and the rest of the cluster runs on; the restarted slot rebuilds its other
actors and not the moved one. A standby whose node is not alive is no standby: the actor is rebuilt
by its slot's restart, as one without.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from actorrt.exceptions import ClusterError
from actorrt.rpc import head_pb2
from actorrt.store.clients import Store
from actorrt.store.lineage_store import standbys_on

log = logging.getLogger("actorrt.head")

# How long the head waits for the store to say which standbys a failed node's actors keep.
READ_TIMEOUT_S = 2.0


async def promoted(store: Store, failed: int, epoch: int, alive: set[int],
                   moved: Mapping[bytes, head_pb2.ActorMove]) -> list[head_pb2.ActorMove]:
    """``promotions`` of the standby table ``store`` holds for slot ``failed``. A store that does
    not answer promotes none: the slot's restart rebuilds them."""
    try:
        async with asyncio.timeout(READ_TIMEOUT_S):
            standbys = await standbys_on(store, failed)
    except (ClusterError, TimeoutError) as exc:
        log.warning("node %d: no standby promoted, the store did not answer: %s", failed, exc)
        return []
    moves = promotions(failed, epoch, standbys, alive, moved)
    for move in moves:
        log.warning("node %d failed: actor %s moves to its standby on node %d", failed, move.actor.hex()[:8],
                    move.slot)
    return moves


def promotions(failed: int, epoch: int, standbys: Mapping[bytes, int], alive: set[int],
               moved: Mapping[bytes, head_pb2.ActorMove]) -> list[head_pb2.ActorMove]:
    """The moves of the actors slot ``failed`` (its incarnation ``epoch``) hosted that keep a
    standby on a live slot.

    ``standbys``: what the failed slot's processes wrote, actor -> its standby's slot; an actor
    that has left the slot since (a move) is not there any more. ``moved``: the newest move of
    each actor moved before."""
    out = []
    for actor, standby in sorted(standbys.items()):
        before = moved.get(actor)
        if before is not None and before.slot != failed:
            continue  # it left this slot (its entry here is stale)
        if standby == failed or standby not in alive:
            continue
        out.append(head_pb2.ActorMove(actor=actor, slot=standby, from_slot=failed, from_epoch=epoch,
                                      epoch=(before.epoch if before is not None else 0) + 1))
    return out
