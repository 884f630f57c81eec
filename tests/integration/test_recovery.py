"""Recovery by exact replay against real node processes killed with SIGKILL.

Oracles are plain Python: the inputs the driver sent, and what surviving actors observed.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time

import pytest

import actorrt
from tests.support.waiting import eventually


@actorrt.remote
class Sink:
    """Downstream of the reducer, on a surviving node: records every update it received."""

    def __init__(self):
        self.seen = []

    def update(self, value, total):
        self.seen.append((value, total))

    def observed(self):
        return self.seen


@actorrt.remote
class Reducer:
    """Nondeterministic: three senders interleave, and its state depends on the order."""

    def __init__(self, sink):
        self.sink = sink
        self.history = []
        self.total = 0

    def add(self, value):
        self.history.append(value)
        self.total = self.total * 31 + value  # order-sensitive: a different order, a different total
        self.total %= 1_000_000_007
        self.sink.update.remote(value, self.total)

    def state(self):
        return self.history, self.total


@actorrt.remote
class Sender:
    def __init__(self, reducer):
        self.reducer = reducer

    def emit(self, values):
        for value in values:
            self.reducer.add.remote(value)


def _poll(ref_fn, done, timeout=90.0):
    """Get ``ref_fn()``'s value until ``done(value)``; returns the value."""
    return eventually(lambda: actorrt.get(ref_fn(), timeout=60), done, timeout)


def test_a_killed_nondeterministic_reducer_matches_its_downstream_and_counts_each_input_once(cluster_with):
    with cluster_with(num_nodes=2, store_shards=2):
        sink = Sink.options(node=0).remote()
        reducer = Reducer.options(node=1, nondeterministic=True).remote(sink)
        senders = [Sender.options(node=0).remote(reducer) for _ in range(3)]
        inputs = list(range(600))
        batches = [inputs[i:i + 10] for i in range(0, len(inputs), 10)]
        pid = actorrt.nodes()[1]["pid"]
        for i, batch in enumerate(batches):
            senders[i % 3].emit.remote(batch)
            if i == len(batches) // 2:
                os.kill(pid, signal.SIGKILL)  # mid-stream
            time.sleep(0.005)

        history, total = _poll(reducer.state.remote, lambda s: len(s[0]) >= len(inputs))
        assert actorrt.nodes()[1]["pid"] != pid, "the node was not restarted"
        assert sorted(history) == inputs  # every input counted exactly once
        observed = _poll(sink.observed.remote, lambda o: len(o) >= len(inputs))
        # No orphans: what the survivor saw is exactly the reducer's (replayed) history.
        assert observed == _running_totals(history)
        assert observed[-1][1] == total
        recovery = next(n for n in actorrt.stats()["nodes"] if n["node"] == 1)["recoveries"]
        assert len(recovery) == 1 and recovery[0]["actors"] == 1
        assert recovery[0]["tasks_replayed"] > 1 and recovery[0]["replay_ms"] > 0, recovery


def _running_totals(history):
    out, total = [], 0
    for value in history:
        total = (total * 31 + value) % 1_000_000_007
        out.append((value, total))
    return out


@actorrt.remote
class Sampler:
    """Draws from the clock and an unseeded generator: only the application log makes it replayable."""

    def __init__(self):
        self.draws = []

    def draw(self, k):
        for _ in range(k):
            self.draws.append((actorrt.record(time.time_ns), actorrt.record(lambda: os.urandom(8).hex())))
        return len(self.draws)

    def state(self):
        return self.draws


def test_a_replayed_actor_gets_its_logged_nondeterministic_values_back(cluster_with):
    with cluster_with(num_nodes=2, store_shards=1):
        sampler = Sampler.options(node=1).remote()
        for _ in range(50):
            sampler.draw.remote(3)
        before = actorrt.get(sampler.state.remote(), timeout=60)
        assert len(before) == 150 and len(set(before)) == 150
        actorrt.kill_node(1)
        assert actorrt.get(sampler.state.remote(), timeout=60) == before  # replayed from the log
        assert actorrt.get(sampler.draw.remote(1), timeout=60) == 151  # and new draws go on
        recovery = next(n for n in actorrt.stats()["nodes"] if n["node"] == 1)["recoveries"]
        assert recovery[0]["tasks_replayed"] >= 51, recovery


@actorrt.remote
class Tags:
    """Deterministic, but its history follows the iteration order of a set of strings."""

    def __init__(self):
        self.history = []

    def add(self, words):
        self.history.extend(set(words))

    def state(self):
        return self.history


def test_a_replay_iterates_sets_of_strings_in_the_order_the_failed_process_did(cluster_with):
    words = [f"word-{i}" for i in range(40)]
    with cluster_with(num_nodes=2, store_shards=1):
        tags = Tags.options(node=1).remote()
        for k in range(5):
            tags.add.remote(words[k:] + words[:k])
        before = actorrt.get(tags.state.remote(), timeout=60)
        assert sorted(before) == sorted(words * 5)
        actorrt.kill_node(1)
        assert actorrt.get(tags.state.remote(), timeout=60) == before


@actorrt.remote
class Total:
    def __init__(self):
        self.values = []

    def add(self, x):
        self.values.append(x)
        return len(self.values)

    def state(self):
        return self.values


@actorrt.remote
class Forwarder:
    """Forwards a random draw per call; only a careful one reads it through the application log."""

    def __init__(self, total, careful):
        self.total, self.careful = total, careful

    async def send(self):
        draw = actorrt.record(random.random) if self.careful else random.random()
        return await self.total.add.remote(draw)


def test_a_replay_that_contradicts_what_a_survivor_saw_stops_the_actor_with_a_clear_error(cluster_with):
    with cluster_with(num_nodes=2, store_shards=1):
        total = Total.options(node=0).remote()
        careless = Forwarder.options(node=1).remote(total, False)
        careful = Forwarder.options(node=1).remote(total, True)
        for _ in range(5):
            actorrt.get([careless.send.remote(), careful.send.remote()], timeout=60)
        seen = actorrt.get(total.state.remote(), timeout=60)
        actorrt.kill_node(1)
        with pytest.raises(actorrt.ActorDiedError, match="diverged.*actorrt.record"):
            actorrt.get(careless.send.remote(), timeout=60)
        assert actorrt.get(careful.send.remote(), timeout=60) == 11  # its replay was faithful
        after = actorrt.get(total.state.remote(), timeout=60)
        assert after[:10] == seen  # the survivor kept what it saw: nothing doubled or rewritten


@actorrt.remote
class Bulky:
    """Answers with 20 KB."""

    def take(self):
        return bytes(20_000)


@actorrt.remote
class Caller:
    def __init__(self, bulky):
        self.bulky, self.received = bulky, 0

    async def call(self):
        self.received += len(await self.bulky.take.remote())
        return self.received


def _results_kept_bytes(class_name: str) -> int:
    return sum(a["results_kept_bytes"] for n in actorrt.stats()["nodes"] for a in n["actors"]
               if a["class"] == class_name)


def test_results_are_kept_for_a_replayed_sender_until_its_checkpoint_covers_them(cluster_with):
    """A replayed caller awaits every result it got since its last checkpoint again: its receiver
    keeps them all (not a window) until the caller's checkpoint covers them, then lets them go."""
    with cluster_with(num_nodes=2, store_shards=1):
        bulky = Bulky.options(node=0).remote()
        never = Caller.options(node=1).remote(bulky)
        often = Caller.options(node=1, checkpoint_every=10).remote(bulky)
        for caller in (never, often):
            assert actorrt.get([caller.call.remote() for _ in range(30)], timeout=60)[-1] == 30 * 20_000
        # All 30 of the caller that never checkpoints; of the other, only those since its checkpoint
        # (whose results go once the checkpoint, written in the background, is announced).
        kept = eventually(lambda: _results_kept_bytes("Bulky"), lambda kept: kept < 42 * 20_100, timeout=20,
                          what="the checkpointed caller's results to be let go")
        assert kept >= 30 * 20_000, kept
        actorrt.kill_node(1)
        assert actorrt.get(never.call.remote(), timeout=60) == 31 * 20_000
        assert actorrt.get(often.call.remote(), timeout=60) == 31 * 20_000


@actorrt.remote
class Slow:
    async def compute(self, x):
        await asyncio.sleep(1.5)
        return x * 10


@actorrt.remote
class Consumer:
    def __init__(self):
        self.got = []

    def take(self, value):
        self.got.append(value)

    def received(self):
        return self.got


@actorrt.remote
class Relay:
    """Submits a task and hands its ref on: the ref's owner is this actor's node process."""

    def __init__(self, slow, consumer):
        self.slow, self.consumer = slow, consumer

    def go(self, x):
        self.consumer.take.remote(self.slow.compute.remote(x))


def test_an_object_owned_by_a_killed_node_is_rebuilt_for_whoever_waits_for_it(cluster_with):
    with cluster_with(num_nodes=2, store_shards=1):
        slow, consumer = Slow.options(node=0).remote(), Consumer.options(node=0).remote()
        relay = Relay.options(node=1).remote(slow, consumer)
        actorrt.get(relay.go.remote(7), timeout=30)
        time.sleep(0.3)  # the consumer's node now waits for the value from the relay's node
        actorrt.kill_node(1)
        # The restarted node replays the relay, which owns the ref again and answers the fetch.
        assert _poll(consumer.received.remote, lambda got: len(got) >= 1) == [70]
        time.sleep(2.0)
        assert actorrt.get(consumer.received.remote(), timeout=30) == [70]  # once


@actorrt.remote
class Maker:
    def __init__(self):
        self.made = 0

    def make(self):
        self.made += 1
        return [actorrt.put(("made", self.made))]


def test_a_value_put_inside_an_actor_is_made_again_by_its_replay(cluster_with):
    with cluster_with(num_nodes=2, store_shards=1):
        maker = Maker.options(node=1).remote()
        inner = [actorrt.get(maker.make.remote(), timeout=30)[0] for _ in range(3)]
        actorrt.kill_node(1)  # the owner of the put values is gone; its replay puts them again
        assert actorrt.get(inner, timeout=60) == [("made", 1), ("made", 2), ("made", 3)]
        node = next(n for n in actorrt.nodes() if n["node"] == 1)
        # (Sometimes a second restart follows; see the session notes. Its cause is not known yet.)
        assert node["restarts"] >= 1 and node["last_failure"], node
        assert actorrt.get(maker.make.remote(), timeout=30)[0] != inner[-1]  # a new put, a new ID


@actorrt.remote
class Worker:
    def __init__(self, tally):
        self.tally = tally

    async def work(self, n):
        for _ in range(n):
            await self.tally.add.remote(1)  # what others see of its progress
            await asyncio.sleep(0.02)
        return n


@actorrt.remote
class Quitter:
    async def quit(self, me):
        actorrt.kill(me)  # its own: this method is not interrupted
        await asyncio.sleep(0.05)
        return "bye"


def test_a_kill_interrupts_the_awaited_method_and_a_replay_stops_it_at_the_same_point(cluster_with):
    with cluster_with(num_nodes=2, store_shards=1):
        tally = Tally.options(node=0).remote()
        worker = Worker.options(node=1).remote(tally)
        running = worker.work.remote(100_000)
        queued = [worker.work.remote(1) for _ in range(3)]
        eventually(lambda: actorrt.get(tally.add.remote(0), timeout=30), lambda total: total >= 5,
                   what="the method under way")
        actorrt.kill(worker)
        with pytest.raises(actorrt.ActorDiedError, match="was killed with actorrt.kill\\(\\) while it ran"):
            actorrt.get(running, timeout=30)
        for ref in queued:
            with pytest.raises(actorrt.ActorDiedError, match="was killed with actorrt.kill\\(\\) before it ran"):
                actorrt.get(ref, timeout=30)
        with pytest.raises(actorrt.ActorDiedError, match="was killed with actorrt.kill"):
            actorrt.get(worker.work.remote(1), timeout=30)
        added = actorrt.get(tally.add.remote(0), timeout=30)
        time.sleep(0.3)
        assert actorrt.get(tally.add.remote(0), timeout=30) == added  # it stopped
        actorrt.kill_node(1)  # its replay runs the method again, up to where the kill interrupted it
        with pytest.raises(actorrt.ActorDiedError, match="was killed with actorrt.kill"):
            actorrt.get(worker.work.remote(1), timeout=60)
        recovery = next(n for n in actorrt.stats()["nodes"] if n["node"] == 1)["recoveries"]
        assert recovery and recovery[-1]["actors"] == 1
        time.sleep(0.3)
        assert actorrt.get(tally.add.remote(0), timeout=30) == added  # no add sent again, none more
        with pytest.raises(TypeError, match="kill\\(\\) takes an actor handle"):
            actorrt.kill("worker")
        quitter = Quitter.options(node=0).remote()
        assert actorrt.get(quitter.quit.remote(quitter), timeout=30) == "bye"
        with pytest.raises(actorrt.ActorDiedError, match="was killed with actorrt.kill"):
            actorrt.get(quitter.quit.remote(quitter), timeout=30)


@actorrt.remote
class Tally:
    def __init__(self):
        self.total = 0

    def add(self, k):
        self.total += k
        return self.total

    def nap(self, seconds):
        time.sleep(seconds)


def test_a_cancelled_task_never_runs_not_even_in_a_replay(cluster_with):
    with cluster_with(num_nodes=2, store_shards=1):
        tally = Tally.options(node=1).remote()
        busy = tally.nap.remote(1.0)
        cancelled = tally.add.remote(100)  # queued behind the nap
        actorrt.cancel(cancelled)
        assert actorrt.get(tally.add.remote(1), timeout=30) == 1
        actorrt.get(busy, timeout=30)
        with pytest.raises(actorrt.TaskCancelledError, match="cancelled before it started"):
            actorrt.get(cancelled, timeout=30)
        actorrt.cancel(busy)  # it ran already: nothing happens
        actorrt.kill_node(1)  # the replay skips the cancelled task again
        assert actorrt.get(tally.add.remote(10), timeout=60) == 11
        with pytest.raises(TypeError, match="cancel\\(\\) takes the ObjectRef of a task"):
            actorrt.cancel(tally)


@actorrt.remote
class Ledger:
    def __init__(self):
        self.entries = []

    def append(self, entry):
        self.entries.append(entry)
        return len(self.entries)


@actorrt.remote
class Teller:
    """Blocks in get inside a plain method (it runs in a thread of its own): its state depends on
    what the ledger answered."""

    def __init__(self, ledger):
        self.ledger = ledger
        self.receipts = []

    def deposit(self, amount):
        position = actorrt.get(self.ledger.append.remote(amount))
        self.receipts.append((amount, position))
        return position

    def state(self):
        return self.receipts


def test_a_method_that_blocks_in_get_is_replayed_exactly_after_its_node_dies(cluster_with):
    with cluster_with(num_nodes=2, store_shards=1):
        ledger = Ledger.options(node=0).remote()
        teller = Teller.options(node=1, checkpoint_every=7).remote(ledger)
        first = [teller.deposit.remote(a) for a in range(30)]
        assert actorrt.get(first[-1], timeout=60) == 30
        actorrt.kill_node(1)
        rest = [teller.deposit.remote(a) for a in range(30, 60)]
        assert actorrt.get(first + rest, timeout=90) == list(range(1, 61))  # each deposit once, in order
        assert actorrt.get(teller.state.remote(), timeout=60) == [(a, a + 1) for a in range(60)]
        assert actorrt.get(ledger.append.remote("end"), timeout=60) == 61  # the ledger saw no deposit twice
