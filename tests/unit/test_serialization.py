import numpy as np
import pytest

from actorrt import TaskError
from actorrt.core.serialization import (
    deserialize,
    error_from_exception,
    exception_from_error,
    runtime_error,
    serialize,
)
from actorrt.exceptions import ActorDiedError
from actorrt.rpc import common_pb2 as pb


def test_large_array_travels_out_of_band():
    arr = np.arange(100_000, dtype=np.float64)
    wire = serialize({"a": arr})
    assert len(wire.buffers) == 1
    assert wire.buffers[0] == arr.tobytes()
    assert len(wire.data) < 1000  # the pickle stream holds no array data
    back = deserialize(pb.SerializedObject.FromString(wire.SerializeToString()))
    np.testing.assert_array_equal(back["a"], arr)


def test_small_values_stay_in_band():
    wire = serialize([1, "x", np.zeros(3)])
    assert len(wire.buffers) == 0
    assert deserialize(wire)[1] == "x"


def test_task_error_carries_type_message_and_traceback():
    try:
        raise KeyError("missing")
    except KeyError as exc:
        err = error_from_exception(exc, b"actor")
    exc = exception_from_error(err)
    assert isinstance(exc, TaskError)
    assert exc.type_name == "builtins.KeyError"
    assert "missing" in exc.remote_message
    assert "raise KeyError" in exc.remote_traceback


def test_runtime_errors_map_to_their_exceptions():
    exc = exception_from_error(runtime_error(pb.ACTOR_DIED, "gone"))
    assert isinstance(exc, ActorDiedError) and str(exc) == "gone"


@pytest.mark.parametrize("value", [None, 0, "s", b"b", {"k": [1, 2]}, (1.5, None)])
def test_round_trip(value):
    assert deserialize(serialize(value)) == value
