"""A replayed actor does not send again the tasks its surviving receivers ran before the failure:
a fire-and-forget call is not sent at all, an awaited one is sent when the replay awaits it (the
receiver answers from its ledger, without running it again). Exactly-once is checked against the
sums computed in Python."""

from __future__ import annotations

import random
import time

import pytest

import actorrt

STEPS = 20


@actorrt.remote
class Tally:
    def __init__(self) -> None:
        self.total = 0
        self.calls = 0

    def add(self, k: int) -> int:
        self.total += k
        self.calls += 1
        return self.total

    def state(self) -> tuple[int, int]:
        return self.total, self.calls


@actorrt.remote
class Caller:
    def __init__(self, tally) -> None:
        self.tally = tally
        self.seen: list[int] = []

    async def step(self, k: int) -> int:
        ref = self.tally.add.remote(k)
        if k % 2:  # odd steps await the running total; even ones fire and forget
            self.seen.append(await ref)
        return len(self.seen)

    def totals_seen(self) -> list[int]:
        return self.seen


def oracle(steps: range) -> tuple[list[int], int]:
    seen, total = [], 0
    for k in steps:
        total += k
        if k % 2:
            seen.append(total)
    return seen, total


def recovery_of(slot: int, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        node = next(n for n in actorrt.stats()["nodes"] if n["node"] == slot)
        done = [r for r in node.get("recoveries", []) if r.get("replay_ms", 0) > 0]
        if done:
            return done[-1]
        time.sleep(0.05)
    raise AssertionError(f"node {slot} did not finish replaying")


def test_a_replay_sends_again_only_the_calls_whose_results_it_awaits(fresh_cluster):
    tally = Tally.options(node=0).remote()
    caller = Caller.options(node=1).remote(tally)
    for k in range(STEPS):
        actorrt.get(caller.step.remote(k), timeout=30)
    actorrt.kill_node(1)  # the caller is rebuilt by replaying its 20 steps
    recovery = recovery_of(1)
    for k in range(STEPS, 2 * STEPS):
        actorrt.get(caller.step.remote(k), timeout=60)
    seen, total = oracle(range(2 * STEPS))
    assert actorrt.get(caller.totals_seen.remote(), timeout=30) == seen
    assert actorrt.get(tally.state.remote(), timeout=30) == (total, 2 * STEPS)  # each add ran once
    # Every add of the replayed steps was run by the tally already: none went out again unasked;
    # the ten awaited ones were sent when the replay awaited them and answered from its ledger.
    assert recovery["sends_skipped"] == STEPS, recovery


@actorrt.remote
class Teller:
    """Tells the tally a random number per call without waiting: an unrecorded draw."""

    def __init__(self, tally) -> None:
        self.tally = tally

    def tell(self) -> None:
        self.tally.add.remote(random.randrange(1000))


def test_a_diverged_call_nobody_awaits_still_stops_the_replay(fresh_cluster):
    tally = Tally.options(node=0).remote()
    teller = Teller.options(node=1).remote(tally)
    for _ in range(5):
        actorrt.get(teller.tell.remote(), timeout=30)
    while actorrt.get(tally.state.remote(), timeout=30)[1] < 5:  # the adds trail the tells
        time.sleep(0.02)
    actorrt.kill_node(1)
    # Its replay draws other numbers: the calls differ from those the tally ran, so they are sent
    # (not skipped), and the tally's answers stop the replayed actor (they come back after the
    # replay, so a call or two may still run first).
    deadline, ran = time.monotonic() + 30, 0
    with pytest.raises(actorrt.ActorDiedError, match="diverged"):
        while time.monotonic() < deadline:
            actorrt.get(teller.tell.remote(), timeout=60)
            ran += 1
            time.sleep(0.05)
    time.sleep(0.5)  # the last new call's add reaches the tally
    # The tally ran the five calls once and each new call's add once: no replayed call ran again.
    assert actorrt.get(tally.state.remote(), timeout=30)[1] == 5 + ran
