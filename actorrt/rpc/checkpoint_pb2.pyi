from actorrt.rpc import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ActorCheckpoint(_message.Message):
    __slots__ = ("actor_id", "seq", "creation", "state", "last_executed", "executed", "senders", "counters", "actors_created", "watermarks", "pending", "last_sender", "extras")
    class ExtrasEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    CREATION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    LAST_EXECUTED_FIELD_NUMBER: _ClassVar[int]
    EXECUTED_FIELD_NUMBER: _ClassVar[int]
    SENDERS_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    ACTORS_CREATED_FIELD_NUMBER: _ClassVar[int]
    WATERMARKS_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    LAST_SENDER_FIELD_NUMBER: _ClassVar[int]
    EXTRAS_FIELD_NUMBER: _ClassVar[int]
    actor_id: bytes
    seq: int
    creation: _common_pb2.ActorCreation
    state: bytes
    last_executed: bytes
    executed: int
    senders: _containers.RepeatedCompositeFieldContainer[SenderProgress]
    counters: _containers.RepeatedCompositeFieldContainer[SubmitCounter]
    actors_created: int
    watermarks: _containers.RepeatedCompositeFieldContainer[Watermark]
    pending: _containers.RepeatedCompositeFieldContainer[PendingTask]
    last_sender: bytes
    extras: _containers.ScalarMap[str, bytes]
    def __init__(self, actor_id: _Optional[bytes] = ..., seq: _Optional[int] = ..., creation: _Optional[_Union[_common_pb2.ActorCreation, _Mapping]] = ..., state: _Optional[bytes] = ..., last_executed: _Optional[bytes] = ..., executed: _Optional[int] = ..., senders: _Optional[_Iterable[_Union[SenderProgress, _Mapping]]] = ..., counters: _Optional[_Iterable[_Union[SubmitCounter, _Mapping]]] = ..., actors_created: _Optional[int] = ..., watermarks: _Optional[_Iterable[_Union[Watermark, _Mapping]]] = ..., pending: _Optional[_Iterable[_Union[PendingTask, _Mapping]]] = ..., last_sender: _Optional[bytes] = ..., extras: _Optional[_Mapping[str, bytes]] = ...) -> None: ...

class PendingTask(_message.Message):
    __slots__ = ("spec", "slot", "large_args")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    LARGE_ARGS_FIELD_NUMBER: _ClassVar[int]
    spec: _common_pb2.TaskSpec
    slot: int
    large_args: _containers.RepeatedCompositeFieldContainer[_common_pb2.ObjectValue]
    def __init__(self, spec: _Optional[_Union[_common_pb2.TaskSpec, _Mapping]] = ..., slot: _Optional[int] = ..., large_args: _Optional[_Iterable[_Union[_common_pb2.ObjectValue, _Mapping]]] = ...) -> None: ...

class Watermark(_message.Message):
    __slots__ = ("source", "batch", "seq")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    source: str
    batch: int
    seq: int
    def __init__(self, source: _Optional[str] = ..., batch: _Optional[int] = ..., seq: _Optional[int] = ...) -> None: ...

class SenderProgress(_message.Message):
    __slots__ = ("sender", "last_counter", "results", "collected")
    SENDER_FIELD_NUMBER: _ClassVar[int]
    LAST_COUNTER_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    COLLECTED_FIELD_NUMBER: _ClassVar[int]
    sender: bytes
    last_counter: int
    results: _containers.RepeatedCompositeFieldContainer[KeptResult]
    collected: int
    def __init__(self, sender: _Optional[bytes] = ..., last_counter: _Optional[int] = ..., results: _Optional[_Iterable[_Union[KeptResult, _Mapping]]] = ..., collected: _Optional[int] = ...) -> None: ...

class KeptResult(_message.Message):
    __slots__ = ("counter", "value")
    COUNTER_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    counter: int
    value: _common_pb2.ObjectValue
    def __init__(self, counter: _Optional[int] = ..., value: _Optional[_Union[_common_pb2.ObjectValue, _Mapping]] = ...) -> None: ...

class SubmitCounter(_message.Message):
    __slots__ = ("receiver", "count")
    RECEIVER_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    receiver: bytes
    count: int
    def __init__(self, receiver: _Optional[bytes] = ..., count: _Optional[int] = ...) -> None: ...
