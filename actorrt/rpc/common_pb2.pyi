from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ErrorKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_KIND_UNSPECIFIED: _ClassVar[ErrorKind]
    TASK_ERROR: _ClassVar[ErrorKind]
    ACTOR_DIED: _ClassVar[ErrorKind]
    UNKNOWN_ACTOR: _ClassVar[ErrorKind]
    NO_SUCH_METHOD: _ClassVar[ErrorKind]
    OBJECT_LOST: _ClassVar[ErrorKind]
    ROLLED_BACK: _ClassVar[ErrorKind]
    REPLAY_DIVERGED: _ClassVar[ErrorKind]
    RESULT_NOT_KEPT: _ClassVar[ErrorKind]
    CLUSTER_LOST: _ClassVar[ErrorKind]
    CANCELLED: _ClassVar[ErrorKind]
    DEADLOCK: _ClassVar[ErrorKind]
ERROR_KIND_UNSPECIFIED: ErrorKind
TASK_ERROR: ErrorKind
ACTOR_DIED: ErrorKind
UNKNOWN_ACTOR: ErrorKind
NO_SUCH_METHOD: ErrorKind
OBJECT_LOST: ErrorKind
ROLLED_BACK: ErrorKind
REPLAY_DIVERGED: ErrorKind
RESULT_NOT_KEPT: ErrorKind
CLUSTER_LOST: ErrorKind
CANCELLED: ErrorKind
DEADLOCK: ErrorKind

class SerializedObject(_message.Message):
    __slots__ = ("data", "buffers", "plain", "shared")
    DATA_FIELD_NUMBER: _ClassVar[int]
    BUFFERS_FIELD_NUMBER: _ClassVar[int]
    PLAIN_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    buffers: _containers.RepeatedScalarFieldContainer[bytes]
    plain: bool
    shared: SharedObject
    def __init__(self, data: _Optional[bytes] = ..., buffers: _Optional[_Iterable[bytes]] = ..., plain: _Optional[bool] = ..., shared: _Optional[_Union[SharedObject, _Mapping]] = ...) -> None: ...

class SharedObject(_message.Message):
    __slots__ = ("host", "pid", "fd", "inode", "generation", "creator", "creator_pid", "offsets", "lengths", "data_address")
    HOST_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    FD_FIELD_NUMBER: _ClassVar[int]
    INODE_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    CREATOR_FIELD_NUMBER: _ClassVar[int]
    CREATOR_PID_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    LENGTHS_FIELD_NUMBER: _ClassVar[int]
    DATA_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    host: str
    pid: int
    fd: int
    inode: int
    generation: int
    creator: str
    creator_pid: int
    offsets: _containers.RepeatedScalarFieldContainer[int]
    lengths: _containers.RepeatedScalarFieldContainer[int]
    data_address: str
    def __init__(self, host: _Optional[str] = ..., pid: _Optional[int] = ..., fd: _Optional[int] = ..., inode: _Optional[int] = ..., generation: _Optional[int] = ..., creator: _Optional[str] = ..., creator_pid: _Optional[int] = ..., offsets: _Optional[_Iterable[int]] = ..., lengths: _Optional[_Iterable[int]] = ..., data_address: _Optional[str] = ...) -> None: ...

class SharedPull(_message.Message):
    __slots__ = ("token", "shared", "start", "length")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    token: str
    shared: SharedObject
    start: int
    length: int
    def __init__(self, token: _Optional[str] = ..., shared: _Optional[_Union[SharedObject, _Mapping]] = ..., start: _Optional[int] = ..., length: _Optional[int] = ...) -> None: ...

class SharedRegion(_message.Message):
    __slots__ = ("creator_pid", "inode", "generation", "count", "holder")
    CREATOR_PID_FIELD_NUMBER: _ClassVar[int]
    INODE_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    creator_pid: int
    inode: int
    generation: int
    count: int
    holder: str
    def __init__(self, creator_pid: _Optional[int] = ..., inode: _Optional[int] = ..., generation: _Optional[int] = ..., count: _Optional[int] = ..., holder: _Optional[str] = ...) -> None: ...

class RemoteError(_message.Message):
    __slots__ = ("kind", "type_name", "message", "traceback", "actor_id", "cause", "where")
    KIND_FIELD_NUMBER: _ClassVar[int]
    TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TRACEBACK_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    WHERE_FIELD_NUMBER: _ClassVar[int]
    kind: ErrorKind
    type_name: str
    message: str
    traceback: str
    actor_id: bytes
    cause: bytes
    where: str
    def __init__(self, kind: _Optional[_Union[ErrorKind, str]] = ..., type_name: _Optional[str] = ..., message: _Optional[str] = ..., traceback: _Optional[str] = ..., actor_id: _Optional[bytes] = ..., cause: _Optional[bytes] = ..., where: _Optional[str] = ...) -> None: ...

class ObjectRefProto(_message.Message):
    __slots__ = ("object_id", "owner_address", "producer", "owner_actor")
    OBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    OWNER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_FIELD_NUMBER: _ClassVar[int]
    OWNER_ACTOR_FIELD_NUMBER: _ClassVar[int]
    object_id: bytes
    owner_address: str
    producer: bytes
    owner_actor: bytes
    def __init__(self, object_id: _Optional[bytes] = ..., owner_address: _Optional[str] = ..., producer: _Optional[bytes] = ..., owner_actor: _Optional[bytes] = ...) -> None: ...

class Arg(_message.Message):
    __slots__ = ("keyword", "value", "ref")
    KEYWORD_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    keyword: str
    value: SerializedObject
    ref: ObjectRefProto
    def __init__(self, keyword: _Optional[str] = ..., value: _Optional[_Union[SerializedObject, _Mapping]] = ..., ref: _Optional[_Union[ObjectRefProto, _Mapping]] = ...) -> None: ...

class ActorCreation(_message.Message):
    __slots__ = ("class_blob", "class_name", "methods", "nondeterministic", "slot", "checkpoint_every", "standby", "max_concurrency", "policy")
    CLASS_BLOB_FIELD_NUMBER: _ClassVar[int]
    CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    METHODS_FIELD_NUMBER: _ClassVar[int]
    NONDETERMINISTIC_FIELD_NUMBER: _ClassVar[int]
    SLOT_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_EVERY_FIELD_NUMBER: _ClassVar[int]
    STANDBY_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    class_blob: bytes
    class_name: str
    methods: _containers.RepeatedScalarFieldContainer[str]
    nondeterministic: bool
    slot: int
    checkpoint_every: int
    standby: int
    max_concurrency: int
    policy: ActorPolicy
    def __init__(self, class_blob: _Optional[bytes] = ..., class_name: _Optional[str] = ..., methods: _Optional[_Iterable[str]] = ..., nondeterministic: _Optional[bool] = ..., slot: _Optional[int] = ..., checkpoint_every: _Optional[int] = ..., standby: _Optional[int] = ..., max_concurrency: _Optional[int] = ..., policy: _Optional[_Union[ActorPolicy, _Mapping]] = ...) -> None: ...

class ActorPolicy(_message.Message):
    __slots__ = ("kind", "every_tasks", "every_s")
    KIND_FIELD_NUMBER: _ClassVar[int]
    EVERY_TASKS_FIELD_NUMBER: _ClassVar[int]
    EVERY_S_FIELD_NUMBER: _ClassVar[int]
    kind: str
    every_tasks: int
    every_s: float
    def __init__(self, kind: _Optional[str] = ..., every_tasks: _Optional[int] = ..., every_s: _Optional[float] = ...) -> None: ...

class TaskSpec(_message.Message):
    __slots__ = ("task_id", "version", "receiver", "sender", "task_counter", "application_log", "parent_id", "predecessor_id", "argument_ids", "dependencies", "method", "args", "owner_address", "actor_creation", "function", "answered_upto", "from_function")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    RECEIVER_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    TASK_COUNTER_FIELD_NUMBER: _ClassVar[int]
    APPLICATION_LOG_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    PREDECESSOR_ID_FIELD_NUMBER: _ClassVar[int]
    ARGUMENT_IDS_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCIES_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    OWNER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ACTOR_CREATION_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    ANSWERED_UPTO_FIELD_NUMBER: _ClassVar[int]
    FROM_FUNCTION_FIELD_NUMBER: _ClassVar[int]
    task_id: bytes
    version: int
    receiver: bytes
    sender: bytes
    task_counter: int
    application_log: _containers.RepeatedScalarFieldContainer[bytes]
    parent_id: bytes
    predecessor_id: bytes
    argument_ids: _containers.RepeatedScalarFieldContainer[bytes]
    dependencies: _containers.RepeatedScalarFieldContainer[bytes]
    method: str
    args: _containers.RepeatedCompositeFieldContainer[Arg]
    owner_address: str
    actor_creation: ActorCreation
    function: bytes
    answered_upto: int
    from_function: bool
    def __init__(self, task_id: _Optional[bytes] = ..., version: _Optional[int] = ..., receiver: _Optional[bytes] = ..., sender: _Optional[bytes] = ..., task_counter: _Optional[int] = ..., application_log: _Optional[_Iterable[bytes]] = ..., parent_id: _Optional[bytes] = ..., predecessor_id: _Optional[bytes] = ..., argument_ids: _Optional[_Iterable[bytes]] = ..., dependencies: _Optional[_Iterable[bytes]] = ..., method: _Optional[str] = ..., args: _Optional[_Iterable[_Union[Arg, _Mapping]]] = ..., owner_address: _Optional[str] = ..., actor_creation: _Optional[_Union[ActorCreation, _Mapping]] = ..., function: _Optional[bytes] = ..., answered_upto: _Optional[int] = ..., from_function: _Optional[bool] = ...) -> None: ...

class TaskVersion(_message.Message):
    __slots__ = ("version", "predecessor_id", "application_log")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PREDECESSOR_ID_FIELD_NUMBER: _ClassVar[int]
    APPLICATION_LOG_FIELD_NUMBER: _ClassVar[int]
    version: int
    predecessor_id: bytes
    application_log: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, version: _Optional[int] = ..., predecessor_id: _Optional[bytes] = ..., application_log: _Optional[_Iterable[bytes]] = ...) -> None: ...

class ObjectValue(_message.Message):
    __slots__ = ("object_id", "value", "error", "keep_call")
    OBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    KEEP_CALL_FIELD_NUMBER: _ClassVar[int]
    object_id: bytes
    value: SerializedObject
    error: RemoteError
    keep_call: bool
    def __init__(self, object_id: _Optional[bytes] = ..., value: _Optional[_Union[SerializedObject, _Mapping]] = ..., error: _Optional[_Union[RemoteError, _Mapping]] = ..., keep_call: _Optional[bool] = ...) -> None: ...
