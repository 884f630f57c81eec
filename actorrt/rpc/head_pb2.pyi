from actorrt.rpc import node_pb2 as _node_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NodeState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NODE_STATE_UNSPECIFIED: _ClassVar[NodeState]
    STARTING: _ClassVar[NodeState]
    ALIVE: _ClassVar[NodeState]
    DEAD: _ClassVar[NodeState]
NODE_STATE_UNSPECIFIED: NodeState
STARTING: NodeState
ALIVE: NodeState
DEAD: NodeState

class NodeInfo(_message.Message):
    __slots__ = ("slot", "epoch", "state", "address", "pid", "hostname", "managed", "heir", "former_addresses", "last_failure", "host_id", "process_started")
    SLOT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    MANAGED_FIELD_NUMBER: _ClassVar[int]
    HEIR_FIELD_NUMBER: _ClassVar[int]
    FORMER_ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    LAST_FAILURE_FIELD_NUMBER: _ClassVar[int]
    HOST_ID_FIELD_NUMBER: _ClassVar[int]
    PROCESS_STARTED_FIELD_NUMBER: _ClassVar[int]
    slot: int
    epoch: int
    state: NodeState
    address: str
    pid: int
    hostname: str
    managed: bool
    heir: int
    former_addresses: _containers.RepeatedScalarFieldContainer[str]
    last_failure: str
    host_id: str
    process_started: int
    def __init__(self, slot: _Optional[int] = ..., epoch: _Optional[int] = ..., state: _Optional[_Union[NodeState, str]] = ..., address: _Optional[str] = ..., pid: _Optional[int] = ..., hostname: _Optional[str] = ..., managed: _Optional[bool] = ..., heir: _Optional[int] = ..., former_addresses: _Optional[_Iterable[str]] = ..., last_failure: _Optional[str] = ..., host_id: _Optional[str] = ..., process_started: _Optional[int] = ...) -> None: ...

class StoreShard(_message.Message):
    __slots__ = ("address", "pid", "restarts", "replicas", "failovers")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    FAILOVERS_FIELD_NUMBER: _ClassVar[int]
    address: str
    pid: int
    restarts: int
    replicas: _containers.RepeatedScalarFieldContainer[str]
    failovers: int
    def __init__(self, address: _Optional[str] = ..., pid: _Optional[int] = ..., restarts: _Optional[int] = ..., replicas: _Optional[_Iterable[str]] = ..., failovers: _Optional[int] = ...) -> None: ...

class FaultTolerance(_message.Message):
    __slots__ = ("mode", "store_delay_ms", "max_forwards", "stash_limit", "checkpoint_dir", "inline_max_bytes", "pinned_budget_bytes")
    MODE_FIELD_NUMBER: _ClassVar[int]
    STORE_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_FORWARDS_FIELD_NUMBER: _ClassVar[int]
    STASH_LIMIT_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_DIR_FIELD_NUMBER: _ClassVar[int]
    INLINE_MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    PINNED_BUDGET_BYTES_FIELD_NUMBER: _ClassVar[int]
    mode: str
    store_delay_ms: float
    max_forwards: int
    stash_limit: int
    checkpoint_dir: str
    inline_max_bytes: int
    pinned_budget_bytes: int
    def __init__(self, mode: _Optional[str] = ..., store_delay_ms: _Optional[float] = ..., max_forwards: _Optional[int] = ..., stash_limit: _Optional[int] = ..., checkpoint_dir: _Optional[str] = ..., inline_max_bytes: _Optional[int] = ..., pinned_budget_bytes: _Optional[int] = ...) -> None: ...

class ClusterView(_message.Message):
    __slots__ = ("revision", "nodes", "store_shards", "store_password", "fault_tolerance", "store_url", "drivers", "rollbacks", "departed_drivers", "cluster_id", "head_grace_s", "stopping", "store_tls", "store_replicas", "moved_actors", "rollback_rounds", "first_calls", "rollback_manifest")
    REVISION_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    STORE_SHARDS_FIELD_NUMBER: _ClassVar[int]
    STORE_PASSWORD_FIELD_NUMBER: _ClassVar[int]
    FAULT_TOLERANCE_FIELD_NUMBER: _ClassVar[int]
    STORE_URL_FIELD_NUMBER: _ClassVar[int]
    DRIVERS_FIELD_NUMBER: _ClassVar[int]
    ROLLBACKS_FIELD_NUMBER: _ClassVar[int]
    DEPARTED_DRIVERS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    HEAD_GRACE_S_FIELD_NUMBER: _ClassVar[int]
    STOPPING_FIELD_NUMBER: _ClassVar[int]
    STORE_TLS_FIELD_NUMBER: _ClassVar[int]
    STORE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    MOVED_ACTORS_FIELD_NUMBER: _ClassVar[int]
    ROLLBACK_ROUNDS_FIELD_NUMBER: _ClassVar[int]
    FIRST_CALLS_FIELD_NUMBER: _ClassVar[int]
    ROLLBACK_MANIFEST_FIELD_NUMBER: _ClassVar[int]
    revision: int
    nodes: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    store_shards: _containers.RepeatedCompositeFieldContainer[StoreShard]
    store_password: str
    fault_tolerance: FaultTolerance
    store_url: str
    drivers: _containers.RepeatedScalarFieldContainer[str]
    rollbacks: int
    departed_drivers: _containers.RepeatedScalarFieldContainer[str]
    cluster_id: bytes
    head_grace_s: float
    stopping: bool
    store_tls: bool
    store_replicas: int
    moved_actors: _containers.RepeatedCompositeFieldContainer[ActorMove]
    rollback_rounds: int
    first_calls: _containers.RepeatedCompositeFieldContainer[FirstCalls]
    rollback_manifest: int
    def __init__(self, revision: _Optional[int] = ..., nodes: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ..., store_shards: _Optional[_Iterable[_Union[StoreShard, _Mapping]]] = ..., store_password: _Optional[str] = ..., fault_tolerance: _Optional[_Union[FaultTolerance, _Mapping]] = ..., store_url: _Optional[str] = ..., drivers: _Optional[_Iterable[str]] = ..., rollbacks: _Optional[int] = ..., departed_drivers: _Optional[_Iterable[str]] = ..., cluster_id: _Optional[bytes] = ..., head_grace_s: _Optional[float] = ..., stopping: _Optional[bool] = ..., store_tls: _Optional[bool] = ..., store_replicas: _Optional[int] = ..., moved_actors: _Optional[_Iterable[_Union[ActorMove, _Mapping]]] = ..., rollback_rounds: _Optional[int] = ..., first_calls: _Optional[_Iterable[_Union[FirstCalls, _Mapping]]] = ..., rollback_manifest: _Optional[int] = ...) -> None: ...

class FirstCalls(_message.Message):
    __slots__ = ("actor", "sender", "upto")
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    UPTO_FIELD_NUMBER: _ClassVar[int]
    actor: bytes
    sender: bytes
    upto: int
    def __init__(self, actor: _Optional[bytes] = ..., sender: _Optional[bytes] = ..., upto: _Optional[int] = ...) -> None: ...

class ActorMove(_message.Message):
    __slots__ = ("actor", "slot", "epoch", "from_slot", "from_epoch")
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    FROM_SLOT_FIELD_NUMBER: _ClassVar[int]
    FROM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    actor: bytes
    slot: int
    epoch: int
    from_slot: int
    from_epoch: int
    def __init__(self, actor: _Optional[bytes] = ..., slot: _Optional[int] = ..., epoch: _Optional[int] = ..., from_slot: _Optional[int] = ..., from_epoch: _Optional[int] = ...) -> None: ...

class RegisterNodeRequest(_message.Message):
    __slots__ = ("slot", "address", "pid", "hostname", "host_id")
    SLOT_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    HOST_ID_FIELD_NUMBER: _ClassVar[int]
    slot: int
    address: str
    pid: int
    hostname: str
    host_id: str
    def __init__(self, slot: _Optional[int] = ..., address: _Optional[str] = ..., pid: _Optional[int] = ..., hostname: _Optional[str] = ..., host_id: _Optional[str] = ...) -> None: ...

class RegisterNodeReply(_message.Message):
    __slots__ = ("slot", "epoch", "view", "detection_ms", "restart_ms", "lease_s")
    SLOT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    DETECTION_MS_FIELD_NUMBER: _ClassVar[int]
    RESTART_MS_FIELD_NUMBER: _ClassVar[int]
    LEASE_S_FIELD_NUMBER: _ClassVar[int]
    slot: int
    epoch: int
    view: ClusterView
    detection_ms: float
    restart_ms: float
    lease_s: float
    def __init__(self, slot: _Optional[int] = ..., epoch: _Optional[int] = ..., view: _Optional[_Union[ClusterView, _Mapping]] = ..., detection_ms: _Optional[float] = ..., restart_ms: _Optional[float] = ..., lease_s: _Optional[float] = ...) -> None: ...

class HeadUpdate(_message.Message):
    __slots__ = ("view", "lease", "deadlock")
    VIEW_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    DEADLOCK_FIELD_NUMBER: _ClassVar[int]
    view: ClusterView
    lease: LeaseGrant
    deadlock: Deadlock
    def __init__(self, view: _Optional[_Union[ClusterView, _Mapping]] = ..., lease: _Optional[_Union[LeaseGrant, _Mapping]] = ..., deadlock: _Optional[_Union[Deadlock, _Mapping]] = ...) -> None: ...

class Await(_message.Message):
    __slots__ = ("waiter", "task_id", "object_id", "producer", "waited_s", "waiter_name")
    WAITER_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_FIELD_NUMBER: _ClassVar[int]
    WAITED_S_FIELD_NUMBER: _ClassVar[int]
    WAITER_NAME_FIELD_NUMBER: _ClassVar[int]
    waiter: bytes
    task_id: bytes
    object_id: bytes
    producer: bytes
    waited_s: float
    waiter_name: str
    def __init__(self, waiter: _Optional[bytes] = ..., task_id: _Optional[bytes] = ..., object_id: _Optional[bytes] = ..., producer: _Optional[bytes] = ..., waited_s: _Optional[float] = ..., waiter_name: _Optional[str] = ...) -> None: ...

class Deadlock(_message.Message):
    __slots__ = ("cycle", "message", "suspected")
    CYCLE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SUSPECTED_FIELD_NUMBER: _ClassVar[int]
    cycle: _containers.RepeatedCompositeFieldContainer[Await]
    message: str
    suspected: bool
    def __init__(self, cycle: _Optional[_Iterable[_Union[Await, _Mapping]]] = ..., message: _Optional[str] = ..., suspected: _Optional[bool] = ...) -> None: ...

class LeaseGrant(_message.Message):
    __slots__ = ("heartbeat", "seconds")
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    heartbeat: int
    seconds: float
    def __init__(self, heartbeat: _Optional[int] = ..., seconds: _Optional[float] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("slot", "epoch", "stats", "address", "seq", "awaits", "confirmed", "lineage")
    SLOT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    AWAITS_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_FIELD_NUMBER: _ClassVar[int]
    LINEAGE_FIELD_NUMBER: _ClassVar[int]
    slot: int
    epoch: int
    stats: _node_pb2.NodeStatsReply
    address: str
    seq: int
    awaits: _containers.RepeatedCompositeFieldContainer[Await]
    confirmed: _containers.RepeatedScalarFieldContainer[bytes]
    lineage: _node_pb2.LineageStats
    def __init__(self, slot: _Optional[int] = ..., epoch: _Optional[int] = ..., stats: _Optional[_Union[_node_pb2.NodeStatsReply, _Mapping]] = ..., address: _Optional[str] = ..., seq: _Optional[int] = ..., awaits: _Optional[_Iterable[_Union[Await, _Mapping]]] = ..., confirmed: _Optional[_Iterable[bytes]] = ..., lineage: _Optional[_Union[_node_pb2.LineageStats, _Mapping]] = ...) -> None: ...

class KillNodeRequest(_message.Message):
    __slots__ = ("slot",)
    SLOT_FIELD_NUMBER: _ClassVar[int]
    slot: int
    def __init__(self, slot: _Optional[int] = ...) -> None: ...

class KillNodeReply(_message.Message):
    __slots__ = ("pid",)
    PID_FIELD_NUMBER: _ClassVar[int]
    pid: int
    def __init__(self, pid: _Optional[int] = ...) -> None: ...

class ClusterStatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ClusterStatsReply(_message.Message):
    __slots__ = ("view", "nodes", "metrics_url", "named", "dashboard_url", "drivers")
    VIEW_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    METRICS_URL_FIELD_NUMBER: _ClassVar[int]
    NAMED_FIELD_NUMBER: _ClassVar[int]
    DASHBOARD_URL_FIELD_NUMBER: _ClassVar[int]
    DRIVERS_FIELD_NUMBER: _ClassVar[int]
    view: ClusterView
    nodes: _containers.RepeatedCompositeFieldContainer[_node_pb2.NodeStatsReply]
    metrics_url: str
    named: _containers.RepeatedCompositeFieldContainer[NamedActor]
    dashboard_url: str
    drivers: _containers.RepeatedCompositeFieldContainer[DriverLineage]
    def __init__(self, view: _Optional[_Union[ClusterView, _Mapping]] = ..., nodes: _Optional[_Iterable[_Union[_node_pb2.NodeStatsReply, _Mapping]]] = ..., metrics_url: _Optional[str] = ..., named: _Optional[_Iterable[_Union[NamedActor, _Mapping]]] = ..., dashboard_url: _Optional[str] = ..., drivers: _Optional[_Iterable[_Union[DriverLineage, _Mapping]]] = ...) -> None: ...

class DriverLineage(_message.Message):
    __slots__ = ("address", "lineage")
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LINEAGE_FIELD_NUMBER: _ClassVar[int]
    address: str
    lineage: _node_pb2.LineageStats
    def __init__(self, address: _Optional[str] = ..., lineage: _Optional[_Union[_node_pb2.LineageStats, _Mapping]] = ...) -> None: ...

class ShutdownRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ShutdownReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class NamedActor(_message.Message):
    __slots__ = ("name", "actor_id", "class_name", "methods", "slot")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    METHODS_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    name: str
    actor_id: bytes
    class_name: str
    methods: _containers.RepeatedScalarFieldContainer[str]
    slot: int
    def __init__(self, name: _Optional[str] = ..., actor_id: _Optional[bytes] = ..., class_name: _Optional[str] = ..., methods: _Optional[_Iterable[str]] = ..., slot: _Optional[int] = ...) -> None: ...

class NameActorReply(_message.Message):
    __slots__ = ("holder",)
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    holder: NamedActor
    def __init__(self, holder: _Optional[_Union[NamedActor, _Mapping]] = ...) -> None: ...

class GetActorRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetActorReply(_message.Message):
    __slots__ = ("actor",)
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    actor: NamedActor
    def __init__(self, actor: _Optional[_Union[NamedActor, _Mapping]] = ...) -> None: ...

class ListActorsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListActorsReply(_message.Message):
    __slots__ = ("actors",)
    ACTORS_FIELD_NUMBER: _ClassVar[int]
    actors: _containers.RepeatedCompositeFieldContainer[NamedActor]
    def __init__(self, actors: _Optional[_Iterable[_Union[NamedActor, _Mapping]]] = ...) -> None: ...

class FreeActorNamesRequest(_message.Message):
    __slots__ = ("actor_id",)
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    actor_id: bytes
    def __init__(self, actor_id: _Optional[bytes] = ...) -> None: ...

class FreeActorNamesReply(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...
