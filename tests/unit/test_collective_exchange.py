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
ALL = tuple(range(SIZE))  # one host: its members split the work between every rank


def segment(pid: int, inode: int, generation: int = 0) -> pb.SharedObject:
    return pb.SharedObject(pid=pid, creator_pid=pid, inode=inode, generation=generation, offsets=[0], lengths=[80])


def contribution(op: str = "allreduce:sum", shape: tuple = (10,), result: pb.SharedObject | None = None,
                 dtype: str = "<f8", host: str = "") -> cpb.Contribution:
    c = cpb.Contribution(op=op, dtype=dtype, shape=shape, size=SIZE, host=host)
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
    ex.writing[1] = ex.part_key()
    assert not ex.ready_to_write(1)  # not twice


def test_the_call_completes_once_every_part_is_in_the_current_segment():
    ex = full(result=segment(10, 1))
    for rank in range(SIZE - 1):
        ex.on_done(rank, segment(10, 1), ALL)
    assert not ex.complete()
    ex.on_done(SIZE - 1, segment(10, 1, generation=7), ALL)  # another use of that memory: not this call's
    assert not ex.complete()
    ex.on_done(SIZE - 1, segment(10, 1), ALL)
    assert ex.complete()


def test_a_part_done_before_the_leaders_contribution_arrives_still_counts():
    ex = Exchange(b"g", 0, SIZE)
    ex.on_done(2, segment(10, 1), ALL)  # streams of different processes are not ordered
    for rank in range(SIZE):
        ex.contribute(rank, contribution(result=segment(10, 1) if rank == 0 else None), "x")
    ex.on_done(0, segment(10, 1), ALL)
    ex.on_done(1, segment(10, 1), ALL)
    assert ex.complete()


def test_a_replaced_leader_makes_every_part_be_written_again_into_its_new_segment():
    ex = full(result=segment(10, 1))
    ex.local[1] = ex.contributions[1]
    for rank in range(SIZE):
        ex.on_done(rank, segment(10, 1), ALL)
    ex.contribute(0, contribution(result=segment(20, 5)), "node-0-again")  # the leader's replay
    assert not ex.complete()
    assert ex.ready_to_write(1)
    for rank in range(SIZE):
        ex.on_done(rank, segment(20, 5), ALL)
    assert ex.complete()


def test_a_lost_result_segment_drops_the_leader_and_the_parts_written_into_it():
    ex = full(result=segment(10, 1))
    for rank in range(SIZE):
        ex.on_done(rank, segment(10, 1), ALL)
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
    assert barrier.complete()


def test_a_call_nobody_can_finish_is_said_so_once_every_member_answered():
    ex = Exchange(b"g", 4, SIZE)
    ex.contribute(1, contribution(), "replaying")
    ex.missing.add(0)
    assert not ex.cannot_finish()  # rank 2 has not answered
    ex.missing.add(2)
    assert ex.cannot_finish()


def test_a_member_said_missing_by_another_host_is_not_missing_while_its_input_is_here():
    ex = full(result=segment(10, 1))
    ex.missing.add(2)  # a host that finished the call answers a late contribution
    assert not ex.cannot_finish()
    ex.drop_from("node-2")  # its process died: now its input is gone too
    assert ex.cannot_finish()


def on_hosts(hosts: str, seq: int = 0, given: dict[int, pb.SharedObject] | None = None, here: str = "a") -> Exchange:
    """Every member contributed, rank r on host ``hosts[r]``; ``given`` maps ranks to the segments they gave."""
    ex = Exchange(b"g", seq, len(hosts), here)
    for rank, host in enumerate(hosts):
        c = contribution(result=(given or {}).get(rank), host=host)
        c.size = len(hosts)
        ex.contribute(rank, c, f"node-{rank}")
    return ex


def test_each_host_has_its_own_segment_given_by_its_first_member_from_the_leader_on():
    ex = on_hosts("abab", seq=1, given={1: segment(11, 1), 2: segment(12, 1)})  # leader rank 1
    assert ex.host_ranks() == [0, 2] and ex.host_leader() == 2
    assert ex.result_rank() == 2 and key_of(ex.result()) == key_of(segment(12, 1))
    there = on_hosts("abab", seq=1, given={1: segment(11, 1), 2: segment(12, 1)}, here="b")
    assert there.host_ranks() == [1, 3] and there.result_rank() == 1


def test_of_two_segments_given_on_one_host_the_first_from_the_leader_counts_and_none_waits_for_one():
    ex = on_hosts("aaba", seq=3, given={0: segment(10, 1), 3: segment(13, 1)})  # two members saw stale views
    assert ex.result_rank() == 3
    nobody = on_hosts("aaba", seq=3)
    assert nobody.result() is None and nobody.host_leader() == 3 and not nobody.ready_to_write(0)


def test_a_part_counts_only_for_the_split_of_its_host_as_it_is_now():
    ex = on_hosts("aaba", given={0: segment(10, 1)})
    ex.local[1] = ex.contributions[1]
    for rank in ex.host_ranks():
        ex.on_done(rank, segment(10, 1), (0, 1, 3))
    assert ex.complete()
    # Rank 3 dies before its part counted anywhere else and is rebuilt on host b: a and the
    # others split the work two ways now, so every part is written again.
    moved = on_hosts("aaba", given={0: segment(10, 1)})
    moved.local[1] = moved.contributions[1]
    moved.on_done(0, segment(10, 1), (0, 1, 3))
    moved.on_done(1, segment(10, 1), (0, 1, 3))
    moved.contribute(3, contribution(host="b"), "node-3-again")
    assert moved.host_ranks() == [0, 1] and not moved.complete() and moved.ready_to_write(1)
    moved.on_done(0, segment(10, 1), (0, 1))
    moved.on_done(1, segment(10, 1), (0, 1))
    assert moved.complete()


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
