"""The results a task gets when the cluster, not its method, ends it: what each failure says."""

from __future__ import annotations

from actorrt.core.serialization import runtime_error
from actorrt.rpc import common_pb2 as pb
from actorrt.rpc import head_pb2


def died(object_id: bytes, slot: int, info: head_pb2.NodeInfo | None, mode: str) -> pb.ObjectValue:
    """Its actor's node died, will not come back, and no live node inherited its actors."""
    msg = (f"node {slot} (incarnation {info.epoch if info else 0}) died and will not be restarted, and no "
           f"live node inherited its actors (ft={mode}); they are gone")
    return pb.ObjectValue(object_id=object_id, error=runtime_error(pb.ACTOR_DIED, msg))


def rolled_back(object_id: bytes, slot: int) -> pb.ObjectValue:
    """ft="checkpoint": a failure took every actor back to the last global checkpoint."""
    msg = (f"node {slot} was restarted by a global rollback: every actor is back at the last global checkpoint; "
           f"resubmit the work done since")
    return pb.ObjectValue(object_id=object_id, error=runtime_error(pb.ROLLED_BACK, msg))


def cluster_lost(object_id: bytes, reason: str) -> pb.ObjectValue:
    """This process lost its head for good."""
    return pb.ObjectValue(object_id=object_id, error=runtime_error(pb.CLUSTER_LOST, reason))


def all_dead(view: head_pb2.ClusterView) -> head_pb2.ClusterView:
    """``view`` one revision on, with every node dead for good (no head is left to restart them)."""
    out = head_pb2.ClusterView()
    out.CopyFrom(view)
    out.revision += 1
    for node in out.nodes:
        node.state = head_pb2.DEAD
        node.managed = False
    return out
