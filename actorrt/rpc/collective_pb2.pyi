from actorrt.rpc import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CollectiveMessage(_message.Message):
    __slots__ = ("group_id", "seq", "rank", "contribution", "done", "complete", "missing", "replaying", "abort", "aborted")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    CONTRIBUTION_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    REPLAYING_FIELD_NUMBER: _ClassVar[int]
    ABORT_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    group_id: bytes
    seq: int
    rank: int
    contribution: Contribution
    done: Done
    complete: _common_pb2.ObjectValue
    missing: bool
    replaying: bool
    abort: AbortRequest
    aborted: Aborted
    def __init__(self, group_id: _Optional[bytes] = ..., seq: _Optional[int] = ..., rank: _Optional[int] = ..., contribution: _Optional[_Union[Contribution, _Mapping]] = ..., done: _Optional[_Union[Done, _Mapping]] = ..., complete: _Optional[_Union[_common_pb2.ObjectValue, _Mapping]] = ..., missing: _Optional[bool] = ..., replaying: _Optional[bool] = ..., abort: _Optional[_Union[AbortRequest, _Mapping]] = ..., aborted: _Optional[_Union[Aborted, _Mapping]] = ...) -> None: ...

class AbortRequest(_message.Message):
    __slots__ = ("timeout_s",)
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    timeout_s: float
    def __init__(self, timeout_s: _Optional[float] = ...) -> None: ...

class Aborted(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class Contribution(_message.Message):
    __slots__ = ("op", "dtype", "shape", "input", "result", "size", "host")
    OP_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    op: str
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    input: _common_pb2.SharedObject
    result: _common_pb2.SharedObject
    size: int
    host: str
    def __init__(self, op: _Optional[str] = ..., dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., input: _Optional[_Union[_common_pb2.SharedObject, _Mapping]] = ..., result: _Optional[_Union[_common_pb2.SharedObject, _Mapping]] = ..., size: _Optional[int] = ..., host: _Optional[str] = ...) -> None: ...

class Done(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: _common_pb2.SharedObject
    def __init__(self, result: _Optional[_Union[_common_pb2.SharedObject, _Mapping]] = ...) -> None: ...
