"""A node process's first moments, without sockets: peers learn its address from the view that
registers it, so their messages can arrive before the node has read its own registration reply."""

from __future__ import annotations

import asyncio

from actorrt.rpc import common_pb2 as pb
from actorrt.rpc import head_pb2, node_pb2
from actorrt.worker import Worker

OBJECT_ID = b"o" * 20


def early_batch() -> node_pb2.PeerBatch:
    """A task (which needs the fault-tolerance mode from the view) and an object after it."""
    task = pb.TaskSpec(task_id=b"t" * 20, receiver=b"a" * 16, method="m", owner_address="peer:1")
    return node_pb2.PeerBatch(messages=[
        node_pb2.PeerMessage(submit=task),
        node_pb2.PeerMessage(object=pb.ObjectValue(object_id=OBJECT_ID, value=pb.SerializedObject())),
    ])


async def test_messages_before_the_first_view_wait_for_it_and_are_not_lost():
    worker = Worker("token", b"n" * 16, asyncio.get_running_loop())
    worker.bind("127.0.0.1:1")
    sent = []
    worker.send_result = lambda owner, value, task=None: sent.append((owner, value))

    fetched = worker.objects.expect(OBJECT_ID)  # as a fetch from this process would
    worker._on_batch("peer:1", early_batch())
    assert not fetched.done() and not sent  # nothing applied without a view

    worker.apply_view(head_pb2.ClusterView(revision=1, fault_tolerance=head_pb2.FaultTolerance(mode="none")))
    assert fetched.done()
    [(owner, value)] = sent  # this process hosts no actors: the task is answered with an error
    assert owner == "peer:1" and value.error.kind == pb.UNKNOWN_ACTOR
