"""Values and errors to and from their wire form.

Values are cloudpickled with pickle protocol 5; buffers that support out-of-band transfer (numpy
arrays, Arrow buffers) are never pickled. Small ones are copied next to the pickle stream into the
message; when they add up to ``SHARED_MIN_BYTES`` or more, they are copied once into shared memory
and the message names where (``objects/shared.py``). Arrays rebuilt from either are read-only views
of those bytes, as in Ray.
"""

from __future__ import annotations

import os
import pickle
import traceback
from pathlib import Path
from typing import Any

from actorrt.core import context
from actorrt.exceptions import (
    ActorDiedError,
    ActorMethodError,
    ActorRTError,
    ClusterError,
    DeadlockError,
    ObjectLostError,
    ReplayDivergedError,
    RolledBackError,
    TaskCancelledError,
    UnknownActorError,
    task_error,
)
from actorrt.objects.shared import SharedObjects
from actorrt.rpc import common_pb2 as pb
from actorrt.util import pickling

# Out-of-band bytes from which a value goes to shared memory (as Ray's 100 KB): below, copying it
# into the message costs less than a segment's bookkeeping.
SHARED_MIN_BYTES = 100 * 1024


# Values of these types pickle by value with the standard pickler (several times faster than
# cloudpickle for the small arguments and results of millisecond tasks).
_PLAIN = frozenset({type(None), bool, int, float, complex, str, bytes})


def _shared() -> SharedObjects | None:
    return context.current().worker.shared if context.is_initialized() else None


def serialize(value: Any) -> pb.SerializedObject:
    out = pb.SerializedObject()
    serialize_into(out, value)
    return out


def object_value(object_id: bytes, value: Any) -> pb.ObjectValue:
    """``value`` serialized as object ``object_id``."""
    out = pb.ObjectValue(object_id=object_id)
    serialize_into(out.value, value)
    return out


def serialize_into(out: pb.SerializedObject, value: Any, shared_min: int = SHARED_MIN_BYTES) -> int:
    """Serialize ``value`` into ``out`` (an empty message, which may be a field of another: setting
    a message field copies it, which for a large value in this process's memory cost ~15x the
    serialization); returns the bytes it holds. Its buffers go to shared memory if they hold
    ``shared_min`` bytes or more."""
    return fill(out, pickled(value), shared_min)


def pickled(value: Any) -> tuple[bytes, list[memoryview], bool]:
    """``value``'s pickle stream, its out-of-band buffers, and whether it is a plain value (pickled
    by the standard pickler; its bytes are comparable between processes)."""
    if type(value) in _PLAIN:
        return pickle.dumps(value, protocol=5), [], True
    buffers: list[pickle.PickleBuffer] = []

    def keep_large(buf: pickle.PickleBuffer) -> bool:
        if buf.raw().nbytes < pickling.OUT_OF_BAND_MIN:
            return True  # serialize in-band
        buffers.append(buf)
        return False

    data = pickling.dumps(value, protocol=5, buffer_callback=keep_large)
    return data, [b.raw() for b in buffers], False


def pickled_size(parts: tuple[bytes, list[memoryview], bool]) -> int:
    data, raw, _ = parts
    return len(data) + sum(r.nbytes for r in raw)


def fill(out: pb.SerializedObject, parts: tuple[bytes, list[memoryview], bool],
         shared_min: int = SHARED_MIN_BYTES) -> int:
    """Put ``pickled``'s ``parts`` into ``out``; returns the bytes they hold."""
    data, raw, plain = parts
    out.data = data
    if plain:
        out.plain = True
        return len(data)
    size = pickled_size(parts)
    shared = _shared() if size - len(data) >= shared_min else None
    placed = shared.write(raw) if shared is not None else None
    if placed is not None:
        out.shared.CopyFrom(placed)
    else:
        out.buffers.extend(bytes(r) for r in raw)
    return size


def deserialize(obj: pb.SerializedObject) -> Any:
    if obj.HasField("shared"):
        shared = _shared()
        if shared is None:
            raise ActorRTError("a value in shared memory, read by a process that is not running actorrt")
        try:
            buffers = shared.read(obj.shared)
        except LookupError as exc:
            raise ObjectLostError(f"a value in shared memory is gone: {exc}") from None
        return pickle.loads(obj.data, buffers=buffers)
    return pickle.loads(obj.data, buffers=list(obj.buffers))


def missing_module(exc: ModuleNotFoundError, what: str) -> ModuleNotFoundError:
    """The error for ``what`` (a class, a function, an argument) whose code imports a module this
    process cannot: what is missing, and how to make it reach the nodes."""
    name = exc.name or str(exc)
    return ModuleNotFoundError(
        f"{what} needs module {name!r}, which node process {os.getpid()} cannot import. A cluster started by "
        f"actorrt.init() sees the driver's working directory and sys.path; to a cluster started apart, send the "
        f"module with actorrt.init(address=..., runtime_env={{'py_modules': [{name.split('.')[0]!r}]}}), or "
        f"install it where the nodes run", name=exc.name)


def error_from_exception(exc: BaseException, actor_id: bytes = b"", where: str = "") -> pb.RemoteError:
    """The wire form of an exception a method raised (``where``: which task, for people): its
    traceback without the runtime's frames, and the exception itself (or its class) for the caller
    to raise an instance of its type."""
    cls = type(exc)
    return pb.RemoteError(
        kind=pb.TASK_ERROR,
        type_name=f"{cls.__module__}.{cls.__qualname__}",
        message=str(exc),
        traceback=_user_traceback(exc),
        actor_id=actor_id,
        cause=_pickled_cause(exc),
        where=where,
    )


# The runtime's own frames are left out of a method's traceback: the user wrote none of them.
_RUNTIME_DIR = str(Path(__file__).resolve().parents[1]) + os.sep
_CAUSE_MAX_BYTES = 64 * 1024


def _user_traceback(exc: BaseException) -> str:
    error = traceback.TracebackException.from_exception(exc)
    for te in [error, *_chained(error)]:
        te.stack = traceback.StackSummary.from_list(
            [frame for frame in te.stack if not frame.filename.startswith(_RUNTIME_DIR)])
    return "".join(error.format())


def _chained(te: traceback.TracebackException) -> list[traceback.TracebackException]:
    out, seen = [], {id(te)}
    while (te := te.__cause__ or te.__context__) is not None and id(te) not in seen:
        seen.add(id(te))
        out.append(te)
    return out


def _pickled_cause(exc: BaseException) -> bytes:
    """The exception cloudpickled, if it comes back from its pickle (one whose constructor takes
    other arguments than ``args`` does not) and is small; else its class; else nothing."""
    for cause in (exc, type(exc)):
        try:
            blob = pickling.dumps(cause)
            if cause is exc:
                pickle.loads(blob)
        except Exception:  # noqa: BLE001 - whatever fails, the caller gets less (a plain TaskError at worst)
            continue
        if len(blob) <= _CAUSE_MAX_BYTES:
            return blob
    return b""


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
    pb.CLUSTER_LOST: ClusterError,
    pb.CANCELLED: TaskCancelledError,
    pb.DEADLOCK: DeadlockError,
}


def exception_from_error(err: pb.RemoteError) -> ActorRTError:
    if err.kind == pb.TASK_ERROR:
        cause = None
        if err.cause:
            try:
                cause = pickle.loads(err.cause)
            except Exception:  # noqa: BLE001 - its type does not exist here: a plain TaskError
                cause = None
        return task_error(err.type_name, err.message, err.traceback, cause, err.where)
    return _KIND_TO_EXCEPTION.get(err.kind, ActorRTError)(err.message)
