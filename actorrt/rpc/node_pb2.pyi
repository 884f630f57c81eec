from actorrt.rpc import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FreezeRequest(_message.Message):
    __slots__ = ("round",)
    ROUND_FIELD_NUMBER: _ClassVar[int]
    round: int
    def __init__(self, round: _Optional[int] = ...) -> None: ...

class FreezeReply(_message.Message):
    __slots__ = ("actors", "opaque")
    ACTORS_FIELD_NUMBER: _ClassVar[int]
    OPAQUE_FIELD_NUMBER: _ClassVar[int]
    actors: _containers.RepeatedCompositeFieldContainer[ActorCut]
    opaque: bool
    def __init__(self, actors: _Optional[_Iterable[_Union[ActorCut, _Mapping]]] = ..., opaque: _Optional[bool] = ...) -> None: ...

class ActorCut(_message.Message):
    __slots__ = ("actor", "slot", "received", "sent", "answered", "kept_from", "outside")
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_FIELD_NUMBER: _ClassVar[int]
    SENT_FIELD_NUMBER: _ClassVar[int]
    ANSWERED_FIELD_NUMBER: _ClassVar[int]
    KEPT_FROM_FIELD_NUMBER: _ClassVar[int]
    OUTSIDE_FIELD_NUMBER: _ClassVar[int]
    actor: bytes
    slot: int
    received: _containers.RepeatedCompositeFieldContainer[PeerCount]
    sent: _containers.RepeatedCompositeFieldContainer[PeerCount]
    answered: _containers.RepeatedCompositeFieldContainer[PeerCount]
    kept_from: _containers.RepeatedCompositeFieldContainer[PeerCount]
    outside: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, actor: _Optional[bytes] = ..., slot: _Optional[int] = ..., received: _Optional[_Iterable[_Union[PeerCount, _Mapping]]] = ..., sent: _Optional[_Iterable[_Union[PeerCount, _Mapping]]] = ..., answered: _Optional[_Iterable[_Union[PeerCount, _Mapping]]] = ..., kept_from: _Optional[_Iterable[_Union[PeerCount, _Mapping]]] = ..., outside: _Optional[_Iterable[bytes]] = ...) -> None: ...

class PeerCount(_message.Message):
    __slots__ = ("peer", "count")
    PEER_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    peer: bytes
    count: int
    def __init__(self, peer: _Optional[bytes] = ..., count: _Optional[int] = ...) -> None: ...

class FlushStashRequest(_message.Message):
    __slots__ = ("slot", "epoch", "senders")
    SLOT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SENDERS_FIELD_NUMBER: _ClassVar[int]
    slot: int
    epoch: int
    senders: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, slot: _Optional[int] = ..., epoch: _Optional[int] = ..., senders: _Optional[_Iterable[bytes]] = ...) -> None: ...

class FlushStashReply(_message.Message):
    __slots__ = ("written", "ran")
    WRITTEN_FIELD_NUMBER: _ClassVar[int]
    RAN_FIELD_NUMBER: _ClassVar[int]
    written: int
    ran: _containers.RepeatedCompositeFieldContainer[RanFrom]
    def __init__(self, written: _Optional[int] = ..., ran: _Optional[_Iterable[_Union[RanFrom, _Mapping]]] = ...) -> None: ...

class RanFrom(_message.Message):
    __slots__ = ("receiver", "sender", "counter", "counters", "digests")
    RECEIVER_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    COUNTER_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    DIGESTS_FIELD_NUMBER: _ClassVar[int]
    receiver: bytes
    sender: bytes
    counter: int
    counters: _containers.RepeatedScalarFieldContainer[int]
    digests: bytes
    def __init__(self, receiver: _Optional[bytes] = ..., sender: _Optional[bytes] = ..., counter: _Optional[int] = ..., counters: _Optional[_Iterable[int]] = ..., digests: _Optional[bytes] = ...) -> None: ...

class PeerBatch(_message.Message):
    __slots__ = ("messages", "view_revision", "sender_epoch", "sender_slot", "sender_pid", "sender_host", "sender_serial")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    VIEW_REVISION_FIELD_NUMBER: _ClassVar[int]
    SENDER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SENDER_SLOT_FIELD_NUMBER: _ClassVar[int]
    SENDER_PID_FIELD_NUMBER: _ClassVar[int]
    SENDER_HOST_FIELD_NUMBER: _ClassVar[int]
    SENDER_SERIAL_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[PeerMessage]
    view_revision: int
    sender_epoch: int
    sender_slot: int
    sender_pid: int
    sender_host: str
    sender_serial: int
    def __init__(self, messages: _Optional[_Iterable[_Union[PeerMessage, _Mapping]]] = ..., view_revision: _Optional[int] = ..., sender_epoch: _Optional[int] = ..., sender_slot: _Optional[int] = ..., sender_pid: _Optional[int] = ..., sender_host: _Optional[str] = ..., sender_serial: _Optional[int] = ...) -> None: ...

class PeerMessage(_message.Message):
    __slots__ = ("submit", "result", "fetch", "object", "lineage", "push", "checkpointed", "committed", "cancel", "release", "channel", "passed", "standby_loaded")
    SUBMIT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    FETCH_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    LINEAGE_FIELD_NUMBER: _ClassVar[int]
    PUSH_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINTED_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    PASSED_FIELD_NUMBER: _ClassVar[int]
    STANDBY_LOADED_FIELD_NUMBER: _ClassVar[int]
    submit: _common_pb2.TaskSpec
    result: _common_pb2.ObjectValue
    fetch: ObjectRequest
    object: _common_pb2.ObjectValue
    lineage: _common_pb2.TaskSpec
    push: _common_pb2.ObjectValue
    checkpointed: Checkpointed
    committed: Committed
    cancel: Cancel
    release: _common_pb2.SharedRegion
    channel: ChannelMessage
    passed: _common_pb2.SharedRegion
    standby_loaded: StandbyLoaded
    def __init__(self, submit: _Optional[_Union[_common_pb2.TaskSpec, _Mapping]] = ..., result: _Optional[_Union[_common_pb2.ObjectValue, _Mapping]] = ..., fetch: _Optional[_Union[ObjectRequest, _Mapping]] = ..., object: _Optional[_Union[_common_pb2.ObjectValue, _Mapping]] = ..., lineage: _Optional[_Union[_common_pb2.TaskSpec, _Mapping]] = ..., push: _Optional[_Union[_common_pb2.ObjectValue, _Mapping]] = ..., checkpointed: _Optional[_Union[Checkpointed, _Mapping]] = ..., committed: _Optional[_Union[Committed, _Mapping]] = ..., cancel: _Optional[_Union[Cancel, _Mapping]] = ..., release: _Optional[_Union[_common_pb2.SharedRegion, _Mapping]] = ..., channel: _Optional[_Union[ChannelMessage, _Mapping]] = ..., passed: _Optional[_Union[_common_pb2.SharedRegion, _Mapping]] = ..., standby_loaded: _Optional[_Union[StandbyLoaded, _Mapping]] = ...) -> None: ...

class ChannelMessage(_message.Message):
    __slots__ = ("name", "payload")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    name: str
    payload: bytes
    def __init__(self, name: _Optional[str] = ..., payload: _Optional[bytes] = ...) -> None: ...

class Cancel(_message.Message):
    __slots__ = ("task_id", "receiver", "sender", "task_counter", "interrupt")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    RECEIVER_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    TASK_COUNTER_FIELD_NUMBER: _ClassVar[int]
    INTERRUPT_FIELD_NUMBER: _ClassVar[int]
    task_id: bytes
    receiver: bytes
    sender: bytes
    task_counter: int
    interrupt: bool
    def __init__(self, task_id: _Optional[bytes] = ..., receiver: _Optional[bytes] = ..., sender: _Optional[bytes] = ..., task_counter: _Optional[int] = ..., interrupt: _Optional[bool] = ...) -> None: ...

class Committed(_message.Message):
    __slots__ = ("task_ids", "versions", "receivers", "senders", "counters")
    TASK_IDS_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    RECEIVERS_FIELD_NUMBER: _ClassVar[int]
    SENDERS_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    task_ids: _containers.RepeatedScalarFieldContainer[bytes]
    versions: _containers.RepeatedScalarFieldContainer[int]
    receivers: _containers.RepeatedScalarFieldContainer[bytes]
    senders: _containers.RepeatedScalarFieldContainer[bytes]
    counters: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, task_ids: _Optional[_Iterable[bytes]] = ..., versions: _Optional[_Iterable[int]] = ..., receivers: _Optional[_Iterable[bytes]] = ..., senders: _Optional[_Iterable[bytes]] = ..., counters: _Optional[_Iterable[int]] = ...) -> None: ...

class ObjectRequest(_message.Message):
    __slots__ = ("object_id", "receiver", "sender", "task_counter", "keep_only")
    OBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    RECEIVER_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    TASK_COUNTER_FIELD_NUMBER: _ClassVar[int]
    KEEP_ONLY_FIELD_NUMBER: _ClassVar[int]
    object_id: bytes
    receiver: bytes
    sender: bytes
    task_counter: int
    keep_only: bool
    def __init__(self, object_id: _Optional[bytes] = ..., receiver: _Optional[bytes] = ..., sender: _Optional[bytes] = ..., task_counter: _Optional[int] = ..., keep_only: _Optional[bool] = ...) -> None: ...

class Checkpointed(_message.Message):
    __slots__ = ("actor", "received", "sent", "seq", "path", "standby", "to_standby")
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_FIELD_NUMBER: _ClassVar[int]
    SENT_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    STANDBY_FIELD_NUMBER: _ClassVar[int]
    TO_STANDBY_FIELD_NUMBER: _ClassVar[int]
    actor: bytes
    received: _containers.RepeatedCompositeFieldContainer[Counter]
    sent: _containers.RepeatedCompositeFieldContainer[Counter]
    seq: int
    path: str
    standby: int
    to_standby: bool
    def __init__(self, actor: _Optional[bytes] = ..., received: _Optional[_Iterable[_Union[Counter, _Mapping]]] = ..., sent: _Optional[_Iterable[_Union[Counter, _Mapping]]] = ..., seq: _Optional[int] = ..., path: _Optional[str] = ..., standby: _Optional[int] = ..., to_standby: _Optional[bool] = ...) -> None: ...

class StandbyLoaded(_message.Message):
    __slots__ = ("actor", "seq", "failed")
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    actor: bytes
    seq: int
    failed: bool
    def __init__(self, actor: _Optional[bytes] = ..., seq: _Optional[int] = ..., failed: _Optional[bool] = ...) -> None: ...

class Counter(_message.Message):
    __slots__ = ("actor", "counter")
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    COUNTER_FIELD_NUMBER: _ClassVar[int]
    actor: bytes
    counter: int
    def __init__(self, actor: _Optional[bytes] = ..., counter: _Optional[int] = ...) -> None: ...

class NodeStatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ActorStats(_message.Message):
    __slots__ = ("actor_id", "class_name", "queued", "executed", "dead", "results_kept_bytes", "metrics", "label", "standby", "inputs")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    EXECUTED_FIELD_NUMBER: _ClassVar[int]
    DEAD_FIELD_NUMBER: _ClassVar[int]
    RESULTS_KEPT_BYTES_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    STANDBY_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    actor_id: bytes
    class_name: str
    queued: int
    executed: int
    dead: bool
    results_kept_bytes: int
    metrics: _containers.ScalarMap[str, float]
    label: str
    standby: int
    inputs: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, actor_id: _Optional[bytes] = ..., class_name: _Optional[str] = ..., queued: _Optional[int] = ..., executed: _Optional[int] = ..., dead: _Optional[bool] = ..., results_kept_bytes: _Optional[int] = ..., metrics: _Optional[_Mapping[str, float]] = ..., label: _Optional[str] = ..., standby: _Optional[int] = ..., inputs: _Optional[_Iterable[str]] = ...) -> None: ...

class NodeStatsReply(_message.Message):
    __slots__ = ("slot", "epoch", "actors", "pending_results", "objects", "messages_sent", "batches_sent", "lineage", "recoveries", "objects_kept", "shared_memory", "standby_copies", "cpu_percent", "rss_bytes")
    class StandbyCopiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    SLOT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    ACTORS_FIELD_NUMBER: _ClassVar[int]
    PENDING_RESULTS_FIELD_NUMBER: _ClassVar[int]
    OBJECTS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_SENT_FIELD_NUMBER: _ClassVar[int]
    BATCHES_SENT_FIELD_NUMBER: _ClassVar[int]
    LINEAGE_FIELD_NUMBER: _ClassVar[int]
    RECOVERIES_FIELD_NUMBER: _ClassVar[int]
    OBJECTS_KEPT_FIELD_NUMBER: _ClassVar[int]
    SHARED_MEMORY_FIELD_NUMBER: _ClassVar[int]
    STANDBY_COPIES_FIELD_NUMBER: _ClassVar[int]
    CPU_PERCENT_FIELD_NUMBER: _ClassVar[int]
    RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    slot: int
    epoch: int
    actors: _containers.RepeatedCompositeFieldContainer[ActorStats]
    pending_results: int
    objects: int
    messages_sent: int
    batches_sent: int
    lineage: LineageStats
    recoveries: _containers.RepeatedCompositeFieldContainer[RecoveryStats]
    objects_kept: ObjectsKept
    shared_memory: SharedMemory
    standby_copies: _containers.ScalarMap[str, int]
    cpu_percent: float
    rss_bytes: int
    def __init__(self, slot: _Optional[int] = ..., epoch: _Optional[int] = ..., actors: _Optional[_Iterable[_Union[ActorStats, _Mapping]]] = ..., pending_results: _Optional[int] = ..., objects: _Optional[int] = ..., messages_sent: _Optional[int] = ..., batches_sent: _Optional[int] = ..., lineage: _Optional[_Union[LineageStats, _Mapping]] = ..., recoveries: _Optional[_Iterable[_Union[RecoveryStats, _Mapping]]] = ..., objects_kept: _Optional[_Union[ObjectsKept, _Mapping]] = ..., shared_memory: _Optional[_Union[SharedMemory, _Mapping]] = ..., standby_copies: _Optional[_Mapping[str, int]] = ..., cpu_percent: _Optional[float] = ..., rss_bytes: _Optional[int] = ...) -> None: ...

class SharedMemory(_message.Message):
    __slots__ = ("in_use_bytes", "in_use", "pooled_bytes", "created", "reused", "held_from_others", "written_bytes", "read_bytes", "lent")
    IN_USE_BYTES_FIELD_NUMBER: _ClassVar[int]
    IN_USE_FIELD_NUMBER: _ClassVar[int]
    POOLED_BYTES_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    REUSED_FIELD_NUMBER: _ClassVar[int]
    HELD_FROM_OTHERS_FIELD_NUMBER: _ClassVar[int]
    WRITTEN_BYTES_FIELD_NUMBER: _ClassVar[int]
    READ_BYTES_FIELD_NUMBER: _ClassVar[int]
    LENT_FIELD_NUMBER: _ClassVar[int]
    in_use_bytes: int
    in_use: int
    pooled_bytes: int
    created: int
    reused: int
    held_from_others: int
    written_bytes: int
    read_bytes: int
    lent: int
    def __init__(self, in_use_bytes: _Optional[int] = ..., in_use: _Optional[int] = ..., pooled_bytes: _Optional[int] = ..., created: _Optional[int] = ..., reused: _Optional[int] = ..., held_from_others: _Optional[int] = ..., written_bytes: _Optional[int] = ..., read_bytes: _Optional[int] = ..., lent: _Optional[int] = ...) -> None: ...

class ObjectsKept(_message.Message):
    __slots__ = ("pinned_objects", "pinned_bytes", "spilled_objects", "spilled_bytes", "released_bytes", "pressure_checkpoints")
    PINNED_OBJECTS_FIELD_NUMBER: _ClassVar[int]
    PINNED_BYTES_FIELD_NUMBER: _ClassVar[int]
    SPILLED_OBJECTS_FIELD_NUMBER: _ClassVar[int]
    SPILLED_BYTES_FIELD_NUMBER: _ClassVar[int]
    RELEASED_BYTES_FIELD_NUMBER: _ClassVar[int]
    PRESSURE_CHECKPOINTS_FIELD_NUMBER: _ClassVar[int]
    pinned_objects: int
    pinned_bytes: int
    spilled_objects: int
    spilled_bytes: int
    released_bytes: int
    pressure_checkpoints: int
    def __init__(self, pinned_objects: _Optional[int] = ..., pinned_bytes: _Optional[int] = ..., spilled_objects: _Optional[int] = ..., spilled_bytes: _Optional[int] = ..., released_bytes: _Optional[int] = ..., pressure_checkpoints: _Optional[int] = ...) -> None: ...

class RecoveryStats(_message.Message):
    __slots__ = ("actors", "tasks_replayed", "flush_ms", "fetch_ms", "replay_ms", "detection_ms", "restart_ms", "from_checkpoint", "slots", "replay_tasks_per_s", "sends_skipped", "promoted", "from_standby")
    ACTORS_FIELD_NUMBER: _ClassVar[int]
    TASKS_REPLAYED_FIELD_NUMBER: _ClassVar[int]
    FLUSH_MS_FIELD_NUMBER: _ClassVar[int]
    FETCH_MS_FIELD_NUMBER: _ClassVar[int]
    REPLAY_MS_FIELD_NUMBER: _ClassVar[int]
    DETECTION_MS_FIELD_NUMBER: _ClassVar[int]
    RESTART_MS_FIELD_NUMBER: _ClassVar[int]
    FROM_CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    REPLAY_TASKS_PER_S_FIELD_NUMBER: _ClassVar[int]
    SENDS_SKIPPED_FIELD_NUMBER: _ClassVar[int]
    PROMOTED_FIELD_NUMBER: _ClassVar[int]
    FROM_STANDBY_FIELD_NUMBER: _ClassVar[int]
    actors: int
    tasks_replayed: int
    flush_ms: float
    fetch_ms: float
    replay_ms: float
    detection_ms: float
    restart_ms: float
    from_checkpoint: int
    slots: _containers.RepeatedScalarFieldContainer[int]
    replay_tasks_per_s: float
    sends_skipped: int
    promoted: bool
    from_standby: int
    def __init__(self, actors: _Optional[int] = ..., tasks_replayed: _Optional[int] = ..., flush_ms: _Optional[float] = ..., fetch_ms: _Optional[float] = ..., replay_ms: _Optional[float] = ..., detection_ms: _Optional[float] = ..., restart_ms: _Optional[float] = ..., from_checkpoint: _Optional[int] = ..., slots: _Optional[_Iterable[int]] = ..., replay_tasks_per_s: _Optional[float] = ..., sends_skipped: _Optional[int] = ..., promoted: _Optional[bool] = ..., from_standby: _Optional[int] = ...) -> None: ...

class LineageStats(_message.Message):
    __slots__ = ("stash_size", "flushed", "committed", "evicted", "forwarded_mean", "forwarded_median", "store_latency_ms_p50", "store_latency_ms_mean", "store_bytes_written", "refused", "store_writes")
    STASH_SIZE_FIELD_NUMBER: _ClassVar[int]
    FLUSHED_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    EVICTED_FIELD_NUMBER: _ClassVar[int]
    FORWARDED_MEAN_FIELD_NUMBER: _ClassVar[int]
    FORWARDED_MEDIAN_FIELD_NUMBER: _ClassVar[int]
    STORE_LATENCY_MS_P50_FIELD_NUMBER: _ClassVar[int]
    STORE_LATENCY_MS_MEAN_FIELD_NUMBER: _ClassVar[int]
    STORE_BYTES_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    STORE_WRITES_FIELD_NUMBER: _ClassVar[int]
    stash_size: int
    flushed: int
    committed: int
    evicted: int
    forwarded_mean: float
    forwarded_median: float
    store_latency_ms_p50: float
    store_latency_ms_mean: float
    store_bytes_written: int
    refused: int
    store_writes: int
    def __init__(self, stash_size: _Optional[int] = ..., flushed: _Optional[int] = ..., committed: _Optional[int] = ..., evicted: _Optional[int] = ..., forwarded_mean: _Optional[float] = ..., forwarded_median: _Optional[float] = ..., store_latency_ms_p50: _Optional[float] = ..., store_latency_ms_mean: _Optional[float] = ..., store_bytes_written: _Optional[int] = ..., refused: _Optional[int] = ..., store_writes: _Optional[int] = ...) -> None: ...
