"""actorrt: a fault-tolerant actor runtime for millisecond tasks (lineage stash, SOSP 2019)."""

from actorrt.api import (
    cancel,
    checkpoint,
    commit_lineage,
    get,
    get_actor,
    kill,
    kill_node,
    nodes,
    put,
    remote,
    rollbacks,
    stats,
    wait,
)
from actorrt.causal import Timer, call_every, call_later, now, random, record, rng
from actorrt.core.object_ref import ObjectRef
from actorrt.exceptions import (
    ActorDiedError,
    ActorMethodError,
    ActorRTError,
    ClusterError,
    DeadlockError,
    GetTimeoutError,
    NotInitializedError,
    ObjectLostError,
    ReplayDivergedError,
    RolledBackError,
    SinkConflictError,
    TaskCancelledError,
    TaskError,
    UnknownActorError,
)
from actorrt.functions import RemoteFunction
from actorrt.handles import ActorClass, ActorHandle
from actorrt.lifecycle import init, is_initialized, shutdown

__version__ = "0.1.0"

__all__ = [
    "ActorClass",
    "ActorDiedError",
    "ActorHandle",
    "ActorMethodError",
    "ActorRTError",
    "ClusterError",
    "DeadlockError",
    "GetTimeoutError",
    "NotInitializedError",
    "ObjectLostError",
    "ObjectRef",
    "RemoteFunction",
    "ReplayDivergedError",
    "RolledBackError",
    "SinkConflictError",
    "TaskError",
    "TaskCancelledError",
    "Timer",
    "UnknownActorError",
    "call_every",
    "call_later",
    "cancel",
    "checkpoint",
    "commit_lineage",
    "get",
    "get_actor",
    "init",
    "is_initialized",
    "kill",
    "kill_node",
    "nodes",
    "now",
    "put",
    "random",
    "record",
    "remote",
    "rng",
    "rollbacks",
    "shutdown",
    "stats",
    "wait",
]
