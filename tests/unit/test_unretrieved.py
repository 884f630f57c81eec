"""What a process tells of failures nobody retrieved (``core/unretrieved.py``): real ones once,
a result dropped by design never, and a constructor's error only if no call raised it."""

from __future__ import annotations

import logging

import pytest

from actorrt.core.unretrieved import UnretrievedErrors
from actorrt.rpc import common_pb2 as pb


def _error(kind: int, actor: bytes = b"", message: str = "boom") -> pb.ObjectValue:
    return pb.ObjectValue(object_id=b"o", error=pb.RemoteError(kind=kind, message=message, actor_id=actor,
                                                               type_name="ValueError"))


@pytest.fixture
def told(caplog):
    caplog.set_level(logging.ERROR, logger="actorrt.unretrieved")
    return lambda: [r.getMessage() for r in caplog.records if r.name == "actorrt.unretrieved"]


def test_a_dropped_failure_is_told_once_and_a_result_dropped_by_design_never(told):
    errors = UnretrievedErrors()
    errors.dropped(b"call", _error(pb.TASK_ERROR))
    errors.dropped(b"resent", _error(pb.RESULT_NOT_KEPT))  # a re-sent call that ran: no failure
    errors.tell(_error(pb.CANCELLED).error)
    errors.dropped(b"got", None)  # a get took its value
    assert len(told()) == 1 and "never retrieved" in told()[0]


def test_a_constructor_error_is_told_when_the_handle_goes_unless_a_call_raised_the_death(told):
    errors = UnretrievedErrors()
    errors.created(b"seen", b"c1")
    errors.created(b"unseen", b"c2")
    errors.raised(_error(pb.ACTOR_DIED, b"seen", "actor died: its constructor raised").error)
    errors.dropped(b"c1", _error(pb.TASK_ERROR, b"seen"))  # its handle went: the call raised it already
    assert told() == []
    errors.dropped(b"c2", _error(pb.TASK_ERROR, b"unseen"))
    assert len(told()) == 1


def test_a_reported_death_counts_as_seen_and_shutdown_tells_what_nobody_saw(told):
    errors = UnretrievedErrors()
    for actor, creation in ((b"a", b"ca"), (b"b", b"cb"), (b"ok", b"cok")):
        errors.created(actor, creation)
    errors.tell(_error(pb.ACTOR_DIED, b"a").error)  # a fire-and-forget call to it failed, and was told
    held = {b"ca": _error(pb.TASK_ERROR, b"a"), b"cb": _error(pb.TASK_ERROR, b"b"), b"cok": pb.ObjectValue()}
    errors.close(held.get)
    assert len(told()) == 2  # the call's report, and b's constructor at shutdown
    errors.dropped(b"later", _error(pb.TASK_ERROR))
    assert len(told()) == 2  # closing: nothing more
