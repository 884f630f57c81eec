"""Peer batches written under a view the receiver has not seen yet, without sockets.

A new node's first messages can beat its own registration reply (peers learn its address from the
view that registers it), and a node that inherits a dead one's actors must have the view that says
so before it handles their tasks: batches wait for the view they were written under.
"""

from __future__ import annotations

import asyncio

from actorrt.core.worker import Worker
from actorrt.rpc import common_pb2 as pb
from actorrt.rpc import head_pb2, node_pb2


def view(revision: int) -> head_pb2.ClusterView:
    return head_pb2.ClusterView(revision=revision, fault_tolerance=head_pb2.FaultTolerance(mode="none"))


def batch(revision: int, *messages: node_pb2.PeerMessage) -> node_pb2.PeerBatch:
    return node_pb2.PeerBatch(messages=messages, view_revision=revision)


def an_object(object_id: bytes) -> node_pb2.PeerMessage:
    return node_pb2.PeerMessage(object=pb.ObjectValue(object_id=object_id, value=pb.SerializedObject()))


def a_task() -> node_pb2.PeerMessage:
    task = pb.TaskSpec(task_id=b"t" * 20, receiver=b"a" * 16, method="m", owner_address="peer:1")
    return node_pb2.PeerMessage(submit=task)


def new_worker() -> tuple[Worker, list]:
    worker = Worker("token", b"n" * 16, asyncio.get_running_loop())
    worker.bind("127.0.0.1:1")
    sent = []
    worker.send_result = lambda owner, value, task=None: sent.append((owner, value))
    return worker, sent


async def test_messages_before_the_first_view_wait_for_it_and_are_not_lost():
    worker, sent = new_worker()
    fetched = worker.objects.expect(b"o" * 20)  # as a fetch from this process would
    worker.on_batch("peer:1", batch(1, a_task(), an_object(b"o" * 20)))  # the task needs the view's mode
    assert not fetched.done() and not sent

    worker.apply_view(view(1))
    assert fetched.done()
    [(owner, value)] = sent  # this process hosts no actors: the task is answered with an error
    assert owner == "peer:1" and value.error.kind == pb.UNKNOWN_ACTOR


async def test_a_batch_from_a_newer_view_waits_for_it_and_those_behind_it_keep_their_order():
    worker, _ = new_worker()
    worker.apply_view(view(1))
    first, second, third = (worker.objects.expect(bytes([i]) * 20) for i in range(3))
    worker.on_batch("peer:1", batch(1, an_object(bytes([0]) * 20)))
    assert first.done()

    worker.on_batch("peer:1", batch(3, an_object(bytes([1]) * 20)))
    worker.on_batch("peer:1", batch(3, an_object(bytes([2]) * 20)))
    worker.apply_view(view(2))
    assert not second.done() and not third.done()
    order = []
    second.add_done_callback(lambda _: order.append(1))
    third.add_done_callback(lambda _: order.append(2))
    worker.apply_view(view(3))
    assert second.done() and third.done()
    await asyncio.sleep(0)
    assert order == [1, 2]
