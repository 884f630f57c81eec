"""A value in shared memory whose process died before this one opened it (objects/traffic.py):
it is asked for again, never taken as lost. (A survivor's task whose argument came beside it from
a node killed a moment later used to fail with "object lost"; the sender's replay makes the
argument again, so the task fetches it from there.)"""

from __future__ import annotations

import os
import subprocess
import sys

from actorrt.objects.host import host_identity
from actorrt.objects.shared import SharedObjects
from actorrt.objects.traffic import SharedTraffic
from actorrt.rpc import common_pb2 as pb


class RecordingFetches:
    """What the traffic asks of the process's fetches (the unit under test is the traffic's choice)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def fetch_instead(self, object_id: bytes, owner: str) -> None:
        self.calls.append(("fetch_instead", object_id, owner))

    def ask_again(self, object_id: bytes) -> None:
        self.calls.append(("ask_again", object_id))

    def on_push(self, value: pb.ObjectValue) -> None:
        self.calls.append(("on_push", value.object_id, value.WhichOneof("kind")))

    def on_object(self, value: pb.ObjectValue) -> None:
        self.calls.append(("on_object", value.object_id, value.WhichOneof("kind")))


def dead_pid() -> int:
    """The pid of a process that has exited."""
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout)


def test_a_value_whose_process_died_unopened_is_asked_for_again_not_taken_as_lost():
    shared = SharedObjects(host_identity(), "receiver:1", lambda *notice: None)
    fetches, results = RecordingFetches(), []
    traffic = SharedTraffic(shared, "token", lambda *a: None, lambda fn, *a: fn(*a), lambda coro: coro.close(),
                            fetches, results.append)
    pid = dead_pid()
    value = pb.ObjectValue(object_id=b"o" * 24, value=pb.SerializedObject(data=b"x", shared=pb.SharedObject(
        host=shared.host, pid=pid, fd=7, inode=1, creator="sender:1", creator_pid=pid, offsets=[0], lengths=[16])))
    traffic.arrived("push", value)  # an argument beside its task: fetched from its owner instead
    traffic.arrived("object", value)  # a fetch's answer: asked again
    traffic.arrived("result", value)  # a result: left for the replay of its task's node to send again
    assert fetches.calls == [("fetch_instead", b"o" * 24, "sender:1"), ("ask_again", b"o" * 24)]
    assert results == []
    shared.close()


def test_a_value_whose_process_is_alive_is_taken():
    shared = SharedObjects(host_identity(), "receiver:1", lambda *notice: None)
    fetches = RecordingFetches()
    traffic = SharedTraffic(shared, "token", lambda *a: None, lambda fn, *a: fn(*a), lambda coro: coro.close(),
                            fetches, lambda value: None)
    placed = shared.write([memoryview(b"0123456789abcdef")])
    value = pb.ObjectValue(object_id=b"p" * 24, value=pb.SerializedObject(data=b"x", shared=placed))
    traffic.arrived("push", value)
    assert fetches.calls == [("on_push", b"p" * 24, "value")]
    shared.close()


def test_a_value_that_could_not_be_opened_gives_its_lease_back_at_once():
    """Its creator may be alive (the value was passed on by a holder that died since): it counts
    the lease until it hears back."""
    notices = []
    shared = SharedObjects(host_identity(), "receiver:1", lambda *notice: notices.append(notice))
    traffic = SharedTraffic(shared, "token", lambda *a: None, lambda fn, *a: fn(*a), lambda coro: coro.close(),
                            RecordingFetches(), lambda value: None)
    passer = dead_pid()
    value = pb.ObjectValue(object_id=b"q" * 24, value=pb.SerializedObject(data=b"x", shared=pb.SharedObject(
        host=shared.host, pid=passer, fd=7, inode=1, generation=3, creator="creator:1", creator_pid=os.getpid(),
        offsets=[0], lengths=[16])))
    traffic.arrived("push", value)
    assert notices == [("creator:1", "release", (os.getpid(), 1, 3), 1, "")]
    shared.close()


def test_a_batch_on_a_new_stream_of_a_same_host_sender_stops_pooling_before_it_is_handled():
    """``LostNotices``, the check every batch goes through before it is handled: a change of the
    sender's stream (or a first batch on a stream after its first, or a new process at its
    address) makes every segment in use here never pooled again; the same stream, a process of
    another host, or a sender's first stream do not."""
    shared = SharedObjects("this-host", "creator:1", lambda *notice: None)
    lost: list[tuple[str, bool]] = []
    shared.holder_lost = lambda address, dead: lost.append((address, dead))  # type: ignore[method-assign]
    traffic = SharedTraffic(shared, "token", lambda *a: None, lambda fn, *a: fn(*a), lambda coro: coro.close(),
                            RecordingFetches(), lambda value: None)
    heard = [("p:1", "this-host", 10, 1), ("p:1", "this-host", 10, 1), ("p:1", "this-host", 10, 2),
             ("p:1", "this-host", 10, 1),  # what is left of the old stream, after the new one
             ("q:1", "this-host", 11, 3),  # the first batch from q: its first streams' were lost
             ("r:1", "other-host", 12, 5), ("r:1", "other-host", 12, 6),  # cannot pass this host's segments on
             ("p:1", "this-host", 13, 1)]  # a new process at p's address: p may have died, unheard of
    for peer, host, pid, serial in heard:
        traffic.heard_from(peer, host, pid, serial)
    assert lost == [("p:1", False), ("p:1", False), ("q:1", False), ("p:1", False)]
    shared.close()
