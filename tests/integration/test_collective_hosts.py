"""actorrt.collective with members on two hosts: the embedded cluster's nodes (one host) and a
node added by hand under another host identity, so the two sides cannot map each other's shared
memory and read each other's inputs over TCP. Every op equals numpy bit for bit (rank order, like
one host); a kill of either side, including the loss of the other host for good (its members
rebuilt on this one), ends in the states a plain-Python run computes.
(``test_cross_host.py`` runs the same calls across network namespaces.)"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import numpy as np
import pytest

import actorrt
from actorrt import collective
from tests.integration.test_collective_recovery import Member, oracle, run

OTHER_HOST = "elsewhere"


@contextlib.contextmanager
def node_of_another_host() -> Iterator[tuple[int, subprocess.Popen]]:
    """A node joined by hand to the running cluster, under another host identity: its slot and process."""
    from actorrt.cluster.session import TOKEN_ENV
    from actorrt.core import context

    session = context.current().head_process.session
    other = subprocess.Popen([sys.executable, "-m", "actorrt.cluster.node", "--head", session.head_address],
                             env=dict(os.environ, **{TOKEN_ENV: session.token, "ACTORRT_HOST_ID": OTHER_HOST}),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not any(n["host_id"] == OTHER_HOST and n["state"] == "ALIVE" for n in actorrt.nodes()):
            assert time.monotonic() < deadline, "the node of the other host did not join"
            time.sleep(0.1)
        yield next(n["node"] for n in actorrt.nodes() if n["host_id"] == OTHER_HOST), other
    finally:
        other.kill()
        other.wait()


@actorrt.remote
class Caller:
    async def allreduce(self, array, op):
        return await collective.allreduce(array, op=op)

    async def reduce_scatter(self, array):
        return await collective.reduce_scatter(array)

    async def allgather(self, array):
        return await collective.allgather(array)

    async def broadcast(self, array, src):
        return await collective.broadcast(array, src_rank=src)

    async def barrier(self):
        await collective.barrier()
        return collective.get_rank()

    def counts(self):
        return collective.stats()


def inputs(count: int, dtype: str, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return [rng.standard_normal(count).astype(dtype) for _ in range(4)]
    return [rng.integers(-50, 50, count).astype(dtype) for _ in range(4)]


def test_every_op_across_two_hosts_equals_numpy_in_rank_order(cluster_with):
    with cluster_with(num_nodes=2, store_shards=1), node_of_another_host() as (far, _):
        # Ranks alternate between the hosts: each host's members are not a run of ranks.
        members = [Caller.options(node=node).remote() for node in (0, far, 1, far)]
        collective.create_collective_group(members)
        for count, dtype, op in [(1, "float32", "sum"), (1001, "float32", "sum"), (300_001, "float64", "mean"),
                                 (4099, "int32", "max"), (777, "int64", "prod"), (2_000_000, "float32", "sum")]:
            arrays = inputs(count, dtype, count)
            got = actorrt.get([m.allreduce.remote(a, op) for m, a in zip(members, arrays, strict=True)], timeout=60)
            want = functools.reduce({"sum": np.add, "mean": np.add, "max": np.maximum, "prod": np.multiply}[op], arrays)
            if op == "mean":
                want = want / 4
            for g in got:
                assert g.dtype == want.dtype and g.tobytes() == want.tobytes(), (count, dtype, op)
        arrays = inputs(10_003, "float64", 7)
        total = functools.reduce(np.add, arrays)
        got = actorrt.get([m.reduce_scatter.remote(a) for m, a in zip(members, arrays, strict=True)], timeout=60)
        assert [g.tobytes() for g in got] == [p.tobytes() for p in np.array_split(total, 4)]
        arrays = inputs(5000, "int16", 8)
        for gathered in actorrt.get([m.allgather.remote(a) for m, a in zip(members, arrays, strict=True)], timeout=60):
            assert [g.tobytes() for g in gathered] == [a.tobytes() for a in arrays]
        for src in (1, 2):  # from the other host, then from this one
            sent = inputs(70_000, "float32", src)[0]
            got = actorrt.get([m.broadcast.remote(sent if r == src else None, src) for r, m in enumerate(members)],
                              timeout=60)
            assert all(g.tobytes() == sent.tobytes() for g in got)
        assert actorrt.get([m.barrier.remote() for m in members], timeout=60) == [0, 1, 2, 3]
        pulled = [actorrt.get(m.counts.remote()).get("pulled_bytes", 0) for m in members]
    # Each host pulled the other host's inputs: its members read them over TCP.
    assert all(p > 0 for p in pulled), pulled


@pytest.mark.parametrize("lost", ["this host's node", "the other host"])
def test_a_member_killed_across_hosts_replays_and_ends_bit_identical(cluster_with, lost):
    calls = 10
    with cluster_with(num_nodes=1, store_shards=1), node_of_another_host() as (far, other):
        members = [Member.options(node=node).remote(rank) for rank, node in enumerate((0, far, 0, far))]
        collective.create_collective_group(members)
        run(members, range(calls // 2))
        if lost == "this host's node":
            actorrt.kill_node(0)  # restarted on this host: ranks 0 and 2 copy their results from the other
            rebuilt = actorrt.get(members[0].counts.remote(), timeout=60)
            assert rebuilt.get("fetched") == calls // 2 and "computed" not in rebuilt, rebuilt
        else:
            # Not restarted: ranks 1 and 3 are rebuilt on this host, from the results kept here.
            other.send_signal(signal.SIGKILL)
            actorrt.get(members[1].counts.remote(), timeout=60)
        run(members, range(calls // 2, calls))
        states = actorrt.get([m.state_bytes.remote() for m in members], timeout=60)
    assert states == oracle(calls)
