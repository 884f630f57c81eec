"""actorrt.collective: every op against numpy (in rank order, bit for bit), for several dtypes and
sizes, and the errors of misuse. Four members on two nodes: two processes, two members each."""

from __future__ import annotations

import asyncio
import functools

import numpy as np
import pytest

import actorrt
from actorrt import collective

MEMBERS = 4
ORACLE = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum, "mean": np.add}


def member_input(rank: int, size: int, dtype: str) -> np.ndarray:
    rng = np.random.default_rng(1000 * rank + size)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(size).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return rng.integers(0, 2, size).astype(bool)
    return rng.integers(-100, 100, size).astype(dtype)


def expected(op: str, arrays: list[np.ndarray]) -> np.ndarray:
    out = functools.reduce(ORACLE[op], arrays)  # rank 0 op rank 1 op ...: the order the members use
    return out / len(arrays) if op == "mean" else out


@actorrt.remote
class Member:
    def __init__(self, rank: int) -> None:
        self.rank = rank

    async def allreduce(self, size: int, dtype: str, op: str, group: str = "default"):
        x = member_input(self.rank, size, dtype)
        before = x.copy()
        out = await collective.allreduce(x, group_name=group, op=op)
        assert (x == before).all()  # the input is left as it is
        return out

    async def reduce_scatter(self, size: int, dtype: str):
        return await collective.reduce_scatter(member_input(self.rank, size, dtype))

    async def allgather(self, shape: tuple, dtype: str):
        return await collective.allgather(np.full(shape, self.rank, dtype=dtype))

    async def broadcast(self, size: int, src: int):
        return await collective.broadcast(member_input(src, size, "float64") if self.rank == src else None,
                                          src_rank=src)

    async def barrier_then_rank(self):
        await collective.barrier()
        return collective.get_rank(), collective.get_collective_group_size()

    async def shaped(self, shape: tuple):
        return await collective.allreduce(np.ones(shape))

    async def twice_at_once(self, group: str):
        return await asyncio.gather(collective.allreduce(np.ones(3), group_name=group),
                                    collective.allreduce(np.ones(3), group_name=group))

    async def in_group(self, name: str, timeout: float | None = None):
        return await collective.allreduce(np.ones(3), group_name=name, timeout=timeout)

    def ping(self):
        return self.rank


@pytest.fixture(scope="module")
def members(cluster):
    group = [Member.options(node=rank % 2).remote(rank) for rank in range(MEMBERS)]
    collective.create_collective_group(group)
    return group


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int8", "uint16"])
@pytest.mark.parametrize("size", [0, 1, 7, 1_023, 100_003])
def test_allreduce_sum_equals_numpy_in_rank_order(members, dtype, size):
    outs = actorrt.get([m.allreduce.remote(size, dtype, "sum") for m in members])
    want = expected("sum", [member_input(r, size, dtype) for r in range(MEMBERS)])
    for out in outs:
        assert out.dtype == want.dtype and out.shape == want.shape
        assert out.tobytes() == want.tobytes()
        assert not out.flags.writeable  # read-only, in shared memory


@pytest.mark.parametrize("op,dtype", [("prod", "float64"), ("min", "int32"), ("max", "float32"), ("mean", "float64"),
                                      ("mean", "complex128"), ("max", "bool"), ("sum", "bool")])
def test_every_reduce_op_equals_numpy(members, op, dtype):
    size = 5_001
    outs = actorrt.get([m.allreduce.remote(size, dtype, op) for m in members])
    want = expected(op, [member_input(r, size, dtype) for r in range(MEMBERS)])
    for r, out in enumerate(outs):
        d = np.nonzero(out != want)[0]
        assert out.tobytes() == want.tobytes(), (r, d[:5], d[-5:], len(d), out[d[:3]], want[d[:3]])


def test_reduce_scatter_gives_each_member_its_part_of_the_sum(members):
    size = 10_001  # not divisible by the group
    outs = actorrt.get([m.reduce_scatter.remote(size, "float64") for m in members])
    parts = np.array_split(expected("sum", [member_input(r, size, "float64") for r in range(MEMBERS)]), MEMBERS)
    assert [o.tobytes() for o in outs] == [p.tobytes() for p in parts]


@pytest.mark.parametrize("shape", [(0,), (3,), (300, 301)])
def test_allgather_returns_every_members_array_in_rank_order(members, shape):
    outs = actorrt.get([m.allgather.remote(shape, "int16") for m in members])
    for out in outs:
        assert [a.shape for a in out] == [shape] * MEMBERS
        assert [a.tobytes() for a in out] == [np.full(shape, r, dtype="int16").tobytes() for r in range(MEMBERS)]


@pytest.mark.parametrize("src", [0, 3])
def test_broadcast_gives_every_member_the_sources_array(members, src):
    outs = actorrt.get([m.broadcast.remote(200_000, src) for m in members])
    assert all(o.tobytes() == member_input(src, 200_000, "float64").tobytes() for o in outs)


def test_barrier_and_ranks(members):
    assert actorrt.get([m.barrier_then_rank.remote() for m in members]) == [(r, MEMBERS) for r in range(MEMBERS)]


def test_mismatched_shapes_fail_in_every_member_saying_which(members):
    refs = [m.shaped.remote((3,) if r != 2 else (4,)) for r, m in enumerate(members)]
    for ref in refs:
        with pytest.raises(ValueError, match=r"rank 0 passed shape \(3,\) <f8 and rank 2 passed shape \(4,\)"):
            actorrt.get(ref)
    # The group goes on: the next call of every member works.
    assert all(o.tobytes() == expected("sum", [member_input(r, 9, "float64") for r in range(MEMBERS)]).tobytes()
               for o in actorrt.get([m.allreduce.remote(9, "float64", "sum") for m in members]))


def test_misuse_says_what_is_wrong(members):
    with pytest.raises(ValueError, match="not a member of a collective group named 'nope'"):
        actorrt.get(members[0].in_group.remote("nope"))
    with pytest.raises(actorrt.ActorRTError, match="inside a method of an actor"):
        asyncio.run(collective.allreduce(np.ones(2)))
    with pytest.raises(TypeError, match="takes actor handles, not a str"):
        collective.create_collective_group([members[0], "member"])
    with pytest.raises(ValueError, match="appears twice"):
        collective.create_collective_group([members[0], members[0]])
    with pytest.raises(ValueError, match="unknown reduce op 'median'"):
        actorrt.get(members[0].allreduce.remote(3, "float64", "median"))
    with pytest.raises(TypeError, match="op='mean' takes floating-point arrays"):
        actorrt.get(members[0].allreduce.remote(3, "int64", "mean"))


def test_a_member_making_two_calls_at_once_is_told_one_at_a_time(cluster):
    solo = Member.remote(0)
    collective.create_collective_group([solo], group_name="solo")
    with pytest.raises(RuntimeError, match="one collective call at a time"):
        actorrt.get(solo.twice_at_once.remote("solo"))


def test_groups_are_separate_and_a_group_of_one_returns_its_input(cluster):
    a, b = Member.remote(0), Member.remote(1)
    collective.create_collective_group([a], group_name="alone")
    collective.create_collective_group([a, b], group_name="pair")
    assert actorrt.get(a.in_group.remote("alone")).tolist() == [1.0, 1.0, 1.0]
    assert [o.tolist() for o in actorrt.get([a.in_group.remote("pair"), b.in_group.remote("pair")])] == [[2.0] * 3] * 2


def test_a_call_a_member_does_not_make_fails_on_every_member_and_the_group_stays_in_step(cluster):
    group = [Member.options(node=rank % 2).remote(rank) for rank in range(MEMBERS)]
    collective.create_collective_group(group, group_name="late", call_timeout=0.5)
    for absent, call in ((3, 0), (0, 2)):  # rank 0's process decides, also while rank 0 is the one absent
        callers = [m for r, m in enumerate(group) if r != absent]
        refs = [m.in_group.remote("late") for m in callers]
        said = (rf"collective call #{call} \(allreduce:sum\) of group 'late' timed out after 0.5 s: "
                rf"rank\(s\) \[{absent}\] did not call it")
        for ref in refs:
            with pytest.raises(collective.CollectiveError, match=said):
                actorrt.get(ref, timeout=30)
        assert actorrt.get([m.ping.remote() for m in group], timeout=30) == list(range(MEMBERS))  # not stuck
        with pytest.raises(collective.CollectiveError, match=said):  # the absent member's call of it: at once
            actorrt.get(group[absent].in_group.remote("late", timeout=60), timeout=30)
        outs = actorrt.get([m.in_group.remote("late") for m in group], timeout=30)  # the next call: in step
        assert [o.tolist() for o in outs] == [[float(MEMBERS)] * 3] * MEMBERS
    with pytest.raises(ValueError, match="call_timeout must be a positive number"):
        collective.create_collective_group(group, group_name="never", call_timeout=0)
