"""The decisions of one collective call (actorrt/collective/exchange.py) and the work split of
its ops (ops.py), without processes or sockets."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from actorrt.collective import ops
from actorrt.collective.exchange import Exchange, parse_op
from actorrt.collective.ops import Op
from actorrt.objects.shared import key_of
from actorrt.rpc import collective_pb2 as cpb
from actorrt.rpc import common_pb2 as pb

SIZE = 3


def segment(pid: int, inode: int, generation: int = 0) -> pb.SharedObject:
    return pb.SharedObject(pid=pid, creator_pid=pid, inode=inode, generation=generation, offsets=[0], lengths=[80])


def contribution(op: str = "allreduce:sum", shape: tuple = (10,), result: pb.SharedObject | None = None,
                 dtype: str = "<f8") -> cpb.Contribution:
    c = cpb.Contribution(op=op, dtype=dtype, shape=shape, size=SIZE)
    if result is not None:
        c.result.CopyFrom(result)
    return c


def full(seq: int = 0, result: pb.SharedObject | None = None) -> Exchange:
    """Every member contributed; call ``seq`` is led by rank ``seq % SIZE``, which gave ``result``."""
    ex = Exchange(b"g", seq, SIZE)
    leader = seq % SIZE
    for rank in range(SIZE):
        ex.contribute(rank, contribution(result=result if rank == leader else None), f"node-{rank}")
    return ex


def test_a_part_is_written_once_everything_it_reads_is_there():
    ex = Exchange(b"g", 0, SIZE)
    ex.local[1] = contribution()
    ex.contribute(1, contribution(), "here")
    assert not ex.ready_to_write(1)  # the others have not contributed
    ex.contribute(2, contribution(), "node-2")
    assert not ex.ready_to_write(1)
    ex.contribute(0, contribution(result=segment(10, 1)), "node-0")  # the leader, with the segment
    assert ex.ready_to_write(1)
    ex.writing[1] = key_of(ex.result())
    assert not ex.ready_to_write(1)  # not twice


def test_the_call_completes_once_every_part_is_in_the_current_segment():
    ex = full(result=segment(10, 1))
    for rank in range(SIZE - 1):
        ex.on_done(rank, segment(10, 1))
    assert not ex.complete()
    ex.on_done(SIZE - 1, segment(10, 1, generation=7))  # another use of that memory: not this call's
    assert not ex.complete()
    ex.on_done(SIZE - 1, segment(10, 1))
    assert ex.complete()


def test_a_part_done_before_the_leaders_contribution_arrives_still_counts():
    ex = Exchange(b"g", 0, SIZE)
    ex.on_done(2, segment(10, 1))  # streams of different processes are not ordered
    for rank in range(SIZE):
        ex.contribute(rank, contribution(result=segment(10, 1) if rank == 0 else None), "x")
    ex.on_done(0, segment(10, 1))
    ex.on_done(1, segment(10, 1))
    assert ex.complete()


def test_a_replaced_leader_makes_every_part_be_written_again_into_its_new_segment():
    ex = full(result=segment(10, 1))
    ex.local[1] = ex.contributions[1]
    for rank in range(SIZE):
        ex.on_done(rank, segment(10, 1))
    ex.contribute(0, contribution(result=segment(20, 5)), "node-0-again")  # the leader's replay
    assert not ex.complete()
    assert ex.ready_to_write(1)
    for rank in range(SIZE):
        ex.on_done(rank, segment(20, 5))
    assert ex.complete()


def test_a_lost_result_segment_drops_the_leader_and_the_parts_written_into_it():
    ex = full(result=segment(10, 1))
    for rank in range(SIZE):
        ex.on_done(rank, segment(10, 1))
    ex.forget(0)
    assert 0 not in ex.contributions and ex.done == {} and ex.result() is None


def test_a_dead_process_contributes_again_unless_its_member_is_local():
    ex = full()
    ex.local[1] = ex.contributions[1]
    ex.sources[1] = "node-1"
    ex.drop_from("node-1")
    ex.drop_from("node-2")
    assert sorted(ex.contributions) == [0, 1]


@pytest.mark.parametrize("other,expected", [
    (contribution(shape=(11,)), "rank 0 passed shape (10,) <f8 and rank 2 passed shape (11,) <f8"),
    (contribution(dtype="<f4"), "rank 0 passed shape (10,) <f8 and rank 2 passed shape (10,) <f4"),
    (contribution(op="allreduce:max"), "rank 0 called allreduce:sum and rank 2 called allreduce:max"),
])
def test_calls_that_do_not_fit_are_told_apart_the_same_way_everywhere(other, expected):
    ex = Exchange(b"g", 0, SIZE)
    ex.contribute(0, contribution(), "a")
    ex.contribute(2, other, "c")
    assert ex.mismatch() == ""  # not decided before everyone came
    ex.contribute(1, contribution(), "b")
    assert expected in ex.mismatch()


def test_broadcast_members_may_pass_other_shapes_and_a_barrier_needs_no_segment():
    ex = Exchange(b"g", 0, SIZE)
    for rank in range(SIZE):
        ex.contribute(rank, contribution(op="broadcast:1", shape=(rank,)), "x")
    assert ex.mismatch() == ""
    barrier = Exchange(b"g", 1, SIZE)
    for rank in range(SIZE):
        barrier.contribute(rank, cpb.Contribution(op="barrier", size=SIZE), "x")
    assert not barrier.complete()  # until rank 0's process says it had every member (and will not abort)
    barrier.on_done(0, pb.SharedObject())
    assert barrier.complete()


def test_a_host_without_rank_0_completes_only_once_rank_0s_process_had_every_contribution():
    ex = Exchange(b"g", 1, SIZE, host="B")  # led by rank 1, on host B with rank 2; rank 0 is on host A
    for rank in range(SIZE):
        c = contribution(result=segment(20, 1) if rank == 1 else None)
        c.host = "A" if rank == 0 else "B"
        ex.contribute(rank, c, f"node-{rank}")
    assert ex.lacks() == []
    ex.on_done(1, segment(20, 1))
    ex.on_done(2, segment(20, 1))
    assert not ex.complete() and not ex.decided  # rank 0's process might still abort it
    ex.on_done(0, segment(10, 5))  # rank 0 wrote its part into host A's segment: it had them all
    assert ex.decided and ex.complete()
    late = Exchange(b"g", 2, SIZE)
    late.contribute(1, contribution(), "node-1")
    assert late.lacks() == [0, 2]


def test_a_call_nobody_can_finish_is_said_so_once_every_member_answered():
    ex = Exchange(b"g", 4, SIZE)
    ex.contribute(1, contribution(), "replaying")
    ex.missing.add(0)
    assert not ex.cannot_finish()  # rank 2 has not answered
    ex.missing.add(2)
    assert ex.cannot_finish()


def test_ops_parse_and_lead_in_turn():
    assert parse_op("allreduce:mean") == Op("allreduce", reduce="mean")
    assert parse_op("broadcast:3") == Op("broadcast", src_rank=3)
    assert [Op("allreduce", reduce="sum").leader(seq, 4) for seq in range(5)] == [0, 1, 2, 3, 0]
    assert Op("broadcast", src_rank=2).leader(7, 4) == 2


@pytest.mark.parametrize("count,itemsize,parts", [(0, 8, 4), (1, 1, 4), (10_000, 4, 3), (1_000_003, 8, 4)])
def test_element_slices_cover_everything_once_on_page_boundaries(count, itemsize, parts):
    slices = ops.element_slices(count, itemsize, parts)
    assert slices[0][0] == 0 and slices[-1][1] == count
    assert all(a[1] == b[0] for a, b in zip(slices, slices[1:], strict=False))
    assert all(start * itemsize % ops.PAGE == 0 for start, end in slices if start < end)


@pytest.mark.parametrize("reduce", ["sum", "prod", "min", "max", "mean"])
def test_reduce_into_is_the_rank_order_reduction_bit_for_bit(reduce):
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal(100_001) for _ in range(4)]
    out = np.empty(100_001)
    ops.reduce_into(out, inputs, reduce)
    want = functools.reduce({"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
                             "mean": np.add}[reduce], inputs)
    want = want / 4 if reduce == "mean" else want
    assert out.tobytes() == want.tobytes()


def test_a_replayed_member_finds_its_calls_abort_in_its_log_and_nothing_else():
    from actorrt.collective import api
    from actorrt.collective.group import GroupMember
    from actorrt.core import context
    from actorrt.lineage.application_log import RunningTask
    from actorrt.util import pickling

    member = GroupMember("g", b"gid", 1, [b"a", b"b"], [0, 1])
    log = [pickling.dumps((b"gid", 0, "allreduce:sum")), pickling.dumps((b"gid", 1, "barrier", "timed out: [0]"))]
    replay = RunningTask(pb.TaskSpec(task_id=b"t", application_log=log), replayed=True)
    token = context.running_task.set(replay)
    try:
        assert api._logged_abort(member, 0) is None  # call #0 completed before the failure
        replay.position = 1
        assert api._logged_abort(member, 1) == "timed out: [0]"
        assert api._logged_abort(GroupMember("h", b"other", 1, [b"a"], [0]), 1) is None
        replay.replayed = False  # a live run reads no log
        assert api._logged_abort(member, 1) is None
    finally:
        context.running_task.reset(token)
