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

from collections.abc import Mapping

from actorrt.rpc import head_pb2


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
