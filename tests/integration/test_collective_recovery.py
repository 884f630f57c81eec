"""actorrt.collective under failures: a member's node SIGKILLed after a call and in the middle
of one. The result is bit-identical to a plain-numpy computation of the same calls; the replayed
members fetch the results of the calls they made before instead of running them again, and the
survivors never compute a part twice (the exchanges are counted)."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

import actorrt
from actorrt import collective
from tests.support.waiting import eventually

MEMBERS, SIZE, CALLS = 4, 30_000, 10


def gradient(rank: int, call: int, state: np.ndarray) -> np.ndarray:
    return np.random.default_rng(100 * call + rank).standard_normal(SIZE) + 1e-3 * state


@actorrt.remote
class Member:
    """A stateful member whose input to each call depends on everything it got before."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.state = np.zeros(SIZE)

    async def step(self, call: int, delay: float = 0.0) -> int:
        grad = gradient(self.rank, call, self.state)
        if delay:
            await asyncio.sleep(delay)
        self.state = self.state + await collective.allreduce(grad)
        return call

    def state_bytes(self) -> bytes:
        return self.state.tobytes()

    def counts(self) -> dict[str, int]:
        return collective.stats()


def oracle(calls: int) -> list[bytes]:
    """The same calls in one process: each member's state, summed in rank order."""
    states = [np.zeros(SIZE) for _ in range(MEMBERS)]
    for call in range(calls):
        grads = [gradient(r, call, states[r]) for r in range(MEMBERS)]
        total = ((grads[0] + grads[1]) + grads[2]) + grads[3]
        states = [s + total for s in states]
    return [s.tobytes() for s in states]


def start_group() -> list:
    members = [Member.options(node=rank % 2).remote(rank) for rank in range(MEMBERS)]
    collective.create_collective_group(members)
    return members


def run(members: list, calls: range, delays: dict[int, float] | None = None) -> None:
    for call in calls:
        actorrt.get([m.step.remote(call, (delays or {}).get(r, 0.0)) for r, m in enumerate(members)], timeout=60)


def test_a_member_killed_after_its_calls_fetches_their_results_and_ends_bit_identical(cluster_with):
    with cluster_with(num_nodes=2, store_shards=1):
        members = start_group()
        run(members, range(CALLS // 2))
        before = [actorrt.get(m.counts.remote()) for m in members[:2]]
        actorrt.kill_node(1)  # ranks 1 and 3: replayed from their constructors
        rebuilt = actorrt.get(members[1].counts.remote(), timeout=60)
        run(members, range(CALLS // 2, CALLS))
        states = actorrt.get([m.state_bytes.remote() for m in members])
        survivors = actorrt.get(members[0].counts.remote())
    assert states == oracle(CALLS)
    # The replay ran none of the calls again: it fetched each one's result from node 0.
    assert rebuilt == {"fetched": CALLS // 2}, rebuilt
    # Node 0 wrote the parts of its two members once per call, failure or not.
    assert before[0]["computed"] == 2 * (CALLS // 2)
    assert survivors["computed"] == 2 * CALLS, (before, survivors)


def test_a_member_killed_in_the_middle_of_a_call_rejoins_it_and_ends_bit_identical(cluster_with):
    middle = 4  # led by rank 0, on the node that survives
    with cluster_with(num_nodes=2, store_shards=1):
        members = start_group()
        run(members, range(middle))
        # Rank 3 is late to call ``middle``: ranks 0, 1 and 2 are in it, waiting, when node 1 dies.
        refs = [m.step.remote(middle, 3.0 if r == 3 else 0.0) for r, m in enumerate(members)]
        time.sleep(1.0)
        actorrt.kill_node(1)
        assert actorrt.get(refs, timeout=60) == [middle] * MEMBERS
        rebuilt = actorrt.get(members[1].counts.remote())
        run(members, range(middle + 1, CALLS))
        states = actorrt.get([m.state_bytes.remote() for m in members])
        survivors = actorrt.get(members[0].counts.remote())
    assert states == oracle(CALLS)
    # The calls before it were fetched; the one under way was completed with the survivors.
    assert rebuilt == {"fetched": middle, "computed": 2}, rebuilt
    assert survivors["computed"] == 2 * CALLS, survivors


def test_without_lineage_a_lost_member_fails_the_call_instead_of_hanging(cluster_with):
    with cluster_with(num_nodes=2, store_shards=1, ft="none"):
        members = start_group()
        run(members, range(2))
        refs = [m.step.remote(2, 3.0 if r == 3 else 0.0) for r, m in enumerate(members)]
        time.sleep(1.0)
        actorrt.kill_node(1)
        for ref in refs[0::2]:  # the members on node 0; neither of node 1's wrote its part (rank 3 never came)
            with pytest.raises(actorrt.TaskError, match=r"call #2 of collective group 'default' cannot complete: "
                                                        r"rank\(s\) \[1, 3\] were lost with their node"):
                actorrt.get(ref, timeout=30)


def test_members_checkpoint_when_what_is_kept_for_them_grows_and_replay_from_there(cluster_with):
    # A budget of 2 MB: a member checkpoints once 0.5 MB of results are kept for it (every third
    # call of 240 KB), with no checkpoint_every and no actorrt.checkpoint.
    with cluster_with(num_nodes=2, store_shards=1, pinned_budget_bytes=2 << 20):
        members = start_group()
        run(members, range(CALLS * 2))
        # (A checkpoint is written in the background, and what it covers goes once it is announced.)
        eventually(lambda: [n["objects_kept"]["pinned_bytes"] for n in actorrt.stats()["nodes"]],
                   lambda kept: all(k <= 3 * SIZE * 8 for k in kept), timeout=20,
                   what="the members' checkpoints to let kept results go (not the 20 calls' 4.8 MB)")
        actorrt.kill_node(1)
        run(members, range(CALLS * 2, CALLS * 3))
        states = actorrt.get([m.state_bytes.remote() for m in members])
        recovery = next(n for n in actorrt.stats()["nodes"] if n["node"] == 1)["recoveries"][0]
    assert states == oracle(CALLS * 3)
    assert recovery["from_checkpoint"] == 2 and recovery["tasks_replayed"] <= 2 * 3, recovery
