"""actorrt: a fault-tolerant actor runtime for millisecond tasks (lineage stash, SOSP 2019)."""

from actorrt.api import (
    checkpoint,
    commit_lineage,
    get,
    init,
    is_initialized,
    kill_node,
    nodes,
    put,
    record,
    remote,
    rollbacks,
    shutdown,
    stats,
    wait,
)
from actorrt.core.object_ref import ObjectRef
from actorrt.exceptions import (
    ActorDiedError,
    ActorMethodError,
    ActorRTError,
    ClusterError,
    GetTimeoutError,
    NotInitializedError,
    ObjectLostError,
    ReplayDivergedError,
    RolledBackError,
    SinkConflictError,
    TaskError,
    UnknownActorError,
)
from actorrt.handles import ActorClass, ActorHandle

__version__ = "0.1.0"

__all__ = [
    "ActorClass",
    "ActorDiedError",
    "ActorHandle",
    "ActorMethodError",
    "ActorRTError",
    "ClusterError",
    "GetTimeoutError",
    "NotInitializedError",
    "ObjectLostError",
    "ObjectRef",
    "ReplayDivergedError",
    "RolledBackError",
    "SinkConflictError",
    "TaskError",
    "UnknownActorError",
    "checkpoint",
    "commit_lineage",
    "get",
    "init",
    "is_initialized",
    "kill_node",
    "nodes",
    "put",
    "record",
    "remote",
    "rollbacks",
    "shutdown",
    "stats",
    "wait",
]
