"""Causal services against real node processes killed with SIGKILL: recorded calls, the clock,
per-actor random generators and timers replay exactly what the lost run did.

Oracles: what a surviving actor observed before the kill, a count of outside calls kept in a file,
and numpy's own generator rebuilt from the actor's recorded seed.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import redis

import actorrt
from actorrt.core import context
from tests.support.waiting import eventually


def _outside_call(path: str, key: int) -> str:
    """An outside service whose calls are counted: one line per call."""
    with open(path, "a") as f:
        f.write(f"{key}\n")
    return f"answer-{key}-{time.time_ns()}"


@actorrt.remote
class Observer:
    """On the surviving node: what the actor under test told it, in order."""

    def __init__(self):
        self.seen = []

    def saw(self, item):
        self.seen.append(item)

    def observed(self):
        return self.seen


@actorrt.remote
class Causal:
    def __init__(self, observer, calls_file):
        self.observer = observer
        self.calls_file = calls_file
        self.log = []
        self.ticks = []
        self.timer = None

    def step(self, key):
        answer = actorrt.record(_outside_call, self.calls_file, key=key)
        item = (key, answer, actorrt.now(), actorrt.random(), actorrt.rng().integers(0, 1 << 30).item())
        self.log.append(item)
        self.observer.saw.remote(("step", item))
        return item

    def seed(self):
        return actorrt.rng().bit_generator.seed_seq.entropy

    def start_ticking(self, period):
        self.timer = actorrt.call_every(period, self.tick)

    def stop_ticking(self):
        return self.timer.cancel()

    def tick(self):
        self.ticks.append((len(self.ticks) + 1, len(self.log), actorrt.now()))
        self.observer.saw.remote(("tick", self.ticks[-1]))

    def once_later(self, delay, tag):
        actorrt.call_later(delay, self.note, tag)

    def note(self, tag):
        self.log.append(("note", tag))
        self.observer.saw.remote(("note", tag))

    def state(self):
        return self.log, self.ticks


def _oracle_draws(seed: int, n: int) -> list[tuple[float, int]]:
    """The draws ``step`` makes, n times, from numpy's generator with the actor's seed."""
    gen = np.random.default_rng(seed)
    return [(float(gen.random()), gen.integers(0, 1 << 30).item()) for _ in range(n)]


def test_recorded_calls_clock_and_draws_replay_exactly_and_outside_calls_run_once(cluster_with, tmp_path):
    calls = tmp_path / "calls.txt"
    with cluster_with(num_nodes=2, store_shards=1, checkpoint_dir=str(tmp_path / "ckpt")):
        observer = Observer.options(node=0).remote()
        actor = Causal.options(node=1).remote(observer, str(calls))
        first = [actorrt.get(actor.step.remote(k), timeout=60) for k in range(20)]
        actorrt.checkpoint([actor], timeout=60)  # the generator's state must survive it
        first += [actorrt.get(actor.step.remote(k), timeout=60) for k in range(20, 40)]
        seed = actorrt.get(actor.seed.remote(), timeout=60)

        actorrt.kill_node(1)
        log, _ = actorrt.get(actor.state.remote(), timeout=60)
        assert log == first  # answers, clock readings and draws, all as the lost run had them
        more = [actorrt.get(actor.step.remote(k), timeout=60) for k in range(40, 50)]

        assert [(d, i) for *_, d, i in first + more] == _oracle_draws(seed, 50)
        assert Path(calls).read_text().split() == [str(k) for k in range(50)]  # one outside call per step
        seen = actorrt.get(observer.observed.remote(), timeout=60)
        assert seen == [("step", item) for item in first + more]  # the survivor saw each once


def test_timers_fire_in_the_actors_order_and_replay_where_they_fired(cluster_with, tmp_path):
    with cluster_with(num_nodes=2, store_shards=1):
        observer = Observer.options(node=0).remote()
        actor = Causal.options(node=1).remote(observer, str(tmp_path / "calls.txt"))
        actorrt.get(actor.start_ticking.remote(0.02), timeout=60)
        for k in range(30):
            actor.step.remote(k)
            time.sleep(0.005)
        eventually(lambda: actorrt.get(actor.state.remote(), timeout=60)[1], lambda t: len(t) >= 5,
                   what="the timer to fire")
        before = actorrt.get(actor.state.remote(), timeout=60)

        actorrt.kill_node(1)  # right after a firing, in the middle of steps
        after = actorrt.get(actor.state.remote(), timeout=60)
        assert after[0][:len(before[0])] == before[0] and after[1][:len(before[1])] == before[1]
        # The timer goes on after the replay, numbered on from the last firing.
        ticks = eventually(lambda: actorrt.get(actor.state.remote(), timeout=60)[1],
                           lambda t: len(t) >= len(before[1]) + 5, what="the timer to fire after recovery")
        assert [n for n, *_ in ticks] == list(range(1, len(ticks) + 1))
        assert actorrt.get(actor.stop_ticking.remote(), timeout=60) is True

        log, ticks = actorrt.get(actor.state.remote(), timeout=60)
        time.sleep(0.2)
        assert actorrt.get(actor.state.remote(), timeout=60)[1] == ticks  # cancelled: no more firings
        seen = actorrt.get(observer.observed.remote(), timeout=60)
        # The survivor saw every firing and step once, in the order the actor ran them.
        assert [x for kind, x in seen if kind == "tick"] == ticks
        assert [x for kind, x in seen if kind == "step"] == log
        # Firings and steps interleaved as the actor ran them, through the replay: each firing
        # came after exactly the steps it counted.
        ran = [kind for kind, _ in seen]
        assert [ran[:i].count("step") for i, kind in enumerate(ran) if kind == "tick"] == [s for _, s, _ in ticks]


def test_a_timer_does_not_hold_the_mailbox_and_fires_once(cluster_with, tmp_path):
    with cluster_with(num_nodes=1, store_shards=1):
        observer = Observer.options(node=0).remote()
        actor = Causal.options(node=0).remote(observer, str(tmp_path / "calls.txt"))
        actorrt.get(actor.once_later.remote(0.3, "later"), timeout=60)
        started = time.monotonic()
        item = actorrt.get(actor.step.remote(1), timeout=60)  # runs while the timer waits
        assert time.monotonic() - started < 0.3
        eventually(lambda: actorrt.get(actor.state.remote(), timeout=60)[0], lambda log: ("note", "later") in log,
                   what="the timer to fire")
        time.sleep(0.3)
        log, _ = actorrt.get(actor.state.remote(), timeout=60)
        assert log == [item, ("note", "later")]


def test_causal_services_reject_what_they_cannot_replay(cluster_with, tmp_path):
    @actorrt.remote
    def in_a_function():
        return actorrt.now()

    with cluster_with(num_nodes=1, store_shards=1):
        other = Observer.options(node=0).remote()

        @actorrt.remote
        class Misuse:
            def later_on_another(self):
                actorrt.call_later(0.1, other.saw, 1)

            def later_on_a_function(self):
                actorrt.call_later(0.1, print)

        misuse = Misuse.options(node=0).remote()
        with pytest.raises(actorrt.TaskError, match="calls a method of the actor that sets the timer"):
            actorrt.get(misuse.later_on_another.remote(), timeout=60)
        with pytest.raises(actorrt.TaskError, match="takes a method of this actor"):
            actorrt.get(misuse.later_on_a_function.remote(), timeout=60)
        with pytest.raises(actorrt.TaskError, match="remote function"):
            actorrt.get(in_a_function.remote(), timeout=60)
        with pytest.raises(actorrt.ActorRTError, match="is for actor tasks"):
            actorrt.call_later(0.1, misuse.later_on_another)
    assert isinstance(actorrt.now(), float) and 0 <= actorrt.random() < 1  # a driver: just the call


@actorrt.remote
class Stamper:
    def __init__(self, observer):
        self.observer = observer

    def stamp(self):
        reading = actorrt.now()
        self.observer.saw.remote(reading)
        return reading

    def ping(self):
        return "pong"

    def trigger(self, other):
        """Have ``other`` stamp, without waiting: its result (and lineage) comes here, not to the driver."""
        other.stamp.remote()


def _cut_off_from_store(pid: int, shard: redis.Redis, port: int) -> None:
    """The node ``pid`` loses its store connections and cannot open new ones (the shard's password
    changes): its flushes are retried, never sent."""
    shard.config_set("requirepass", "not-the-cluster-password")
    for conn in psutil.Process(pid).net_connections():
        if conn.raddr and conn.raddr.port == port:
            shard.client_kill_filter(_type=None, addr=f"{conn.laddr.ip}:{conn.laddr.port}")


def test_a_recorded_event_lost_beyond_max_forwards_stops_the_replay_with_a_clear_error(cluster_with):
    """With ``max_forwards=0`` no lineage is forwarded: what a node recorded lives only there until
    the store has it. A node cut off from the store runs a stamp (a recorded clock reading sent to a
    survivor), then dies. Its replay cannot know that stamp, so the stamper's next reading reaches
    the survivor under the number the lost one had; the survivor refuses it, and the stamper stops
    with an error that names the cause. The survivor never takes a reading the lost run did not send."""
    with cluster_with(num_nodes=2, store_shards=1, max_forwards=0):
        observer = Observer.options(node=0).remote()
        stamper = Stamper.options(node=1).remote(observer)
        trigger = Stamper.options(node=1).remote(observer)  # it dies with the stamper
        actorrt.get(stamper.stamp.remote(), timeout=60)
        view = context.current().worker.membership.view
        host, _, port = view.store_shards[0].address.rpartition(":")
        shard = redis.Redis(host=host, port=int(port), password=view.store_password)
        try:
            eventually(lambda: actorrt.stats()["nodes"][1]["lineage"]["stash_size"], lambda size: size == 0,
                       what="node 1's lineage to be in the store")
            _cut_off_from_store(next(n["pid"] for n in actorrt.nodes() if n["node"] == 1), shard, int(port))
            actorrt.get(trigger.trigger.remote(stamper), timeout=60)
            seen = eventually(lambda: actorrt.get(observer.observed.remote(), timeout=60),
                              lambda seen: len(seen) == 2, what="the survivor to see the second reading")
            actorrt.kill_node(1)
        finally:
            shard.config_set("requirepass", view.store_password)
            shard.close()

        actorrt.get(stamper.stamp.remote(), timeout=60)  # its replay rebuilt the stamper without the lost stamp

        def stopped() -> str | None:
            try:
                actorrt.get(stamper.ping.remote(), timeout=60)
            except actorrt.ActorDiedError as exc:
                return str(exc)
            return None

        why = eventually(stopped, lambda message: message is not None, what="the survivor to stop the stamper")
        assert "diverged" in why and "max_forwards" in why
        assert actorrt.get(observer.observed.remote(), timeout=60) == seen
