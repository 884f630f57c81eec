"""Values and errors to and from their wire form.

Values are cloudpickled with pickle protocol 5; buffers that support out-of-band transfer (numpy
arrays, Arrow buffers) are handed over as raw bytes next to the pickle stream, so their contents are
copied once into the message and never pickled. Arrays rebuilt from a message are read-only views of
its bytes, as in Ray.
"""

from __future__ import annotations

import pickle
import traceback
from typing import Any

import cloudpickle

from actorrt.exceptions import (
    ActorDiedError,
    ActorMethodError,
    ActorRTError,
    ObjectLostError,
    ReplayDivergedError,
    RolledBackError,
    TaskError,
    UnknownActorError,
)
from actorrt.rpc import common_pb2 as pb

# Arrays smaller than this are cheaper to keep inside the pickle stream.
_OUT_OF_BAND_MIN = 1024


# Values of these types pickle by value with the standard pickler (several times faster than
# cloudpickle for the small arguments and results of millisecond tasks).
_PLAIN = frozenset({type(None), bool, int, float, complex, str, bytes})


def serialize(value: Any) -> pb.SerializedObject:
    return serialize_sized(value)[0]


def serialize_sized(value: Any) -> tuple[pb.SerializedObject, int]:
    """``value`` serialized, and the bytes it holds (measured here: reading a bytes field back
    from a protobuf copies it, and ``ByteSize`` serializes the message)."""
    if type(value) in _PLAIN:
        data = pickle.dumps(value, protocol=5)
        return pb.SerializedObject(data=data, plain=True), len(data)
    buffers: list[pickle.PickleBuffer] = []

    def keep_large(buf: pickle.PickleBuffer) -> bool:
        if buf.raw().nbytes < _OUT_OF_BAND_MIN:
            return True  # serialize in-band
        buffers.append(buf)
        return False

    data = cloudpickle.dumps(value, protocol=5, buffer_callback=keep_large)
    out = [bytes(b.raw()) for b in buffers]
    return pb.SerializedObject(data=data, buffers=out), len(data) + sum(map(len, out))


def deserialize(obj: pb.SerializedObject) -> Any:
    return pickle.loads(obj.data, buffers=list(obj.buffers))


def error_from_exception(exc: BaseException, actor_id: bytes = b"") -> pb.RemoteError:
    """The wire form of an exception a method raised."""
    cls = type(exc)
    return pb.RemoteError(
        kind=pb.TASK_ERROR,
        type_name=f"{cls.__module__}.{cls.__qualname__}",
        message=str(exc),
        traceback="".join(traceback.format_exception(exc)),
        actor_id=actor_id,
    )


def runtime_error(kind: int, message: str, actor_id: bytes = b"") -> pb.RemoteError:
    """The wire form of an error the runtime itself reports (dead actor, unknown method...)."""
    return pb.RemoteError(kind=kind, message=message, actor_id=actor_id)


_KIND_TO_EXCEPTION: dict[int, type[ActorRTError]] = {
    pb.ACTOR_DIED: ActorDiedError,
    pb.UNKNOWN_ACTOR: UnknownActorError,
    pb.NO_SUCH_METHOD: ActorMethodError,
    pb.OBJECT_LOST: ObjectLostError,
    pb.ROLLED_BACK: RolledBackError,
    pb.REPLAY_DIVERGED: ReplayDivergedError,
    pb.RESULT_NOT_KEPT: ObjectLostError,
}


def exception_from_error(err: pb.RemoteError) -> ActorRTError:
    if err.kind == pb.TASK_ERROR:
        return TaskError(err.type_name, err.message, err.traceback)
    return _KIND_TO_EXCEPTION.get(err.kind, ActorRTError)(err.message)
