"""The head's own failure: its supervisor restarts it, the restarted head takes over the cluster
from the store and the processes that kept running, and running work never notices.

The head is SIGKILLed for real. To keep it down for a while, its supervisor is SIGSTOPped first
(and SIGCONTed to let it restart the head). Every count is checked against a plain-Python count of
the calls made.
"""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import actorrt
from actorrt.cluster import head_client
from actorrt.cluster.head_state import HeadState
from actorrt.core import context
from actorrt.rpc import head_pb2
from actorrt.store.opening import store_of_view
from actorrt.streaming import Dataflow
from actorrt.testing import Counter, Relay, children_of, cluster_session, head_down, wait_for_new_head
from actorrt.util.processes import process_alive


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (found := predicate()):
        assert time.monotonic() < deadline, what
        time.sleep(0.05)
    return found


def _processes() -> dict[str, int]:
    view = context.current().worker.membership.view
    return {**{f"node {n.slot}": n.pid for n in view.nodes}, **{f"shard {s.address}": s.pid for s in view.store_shards}}


def test_a_killed_head_is_restarted_and_running_work_never_notices(cluster_with):
    """The head dies while a driver calls three named actors in a loop: no call fails or waits for
    it, the nodes and store shards are the same processes after, and the names are there again."""
    with cluster_with(num_nodes=2, store_shards=2):
        counters = [Counter.options(name=f"counter-{i}", node=i % 2).remote() for i in range(3)]
        calls = [0, 0, 0]
        before, epochs = _processes(), [n["epoch"] for n in actorrt.nodes()]
        s = cluster_session()
        os.kill(s.head_pid, signal.SIGKILL)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline or cluster_session().head_pid == s.head_pid:
            for i, counter in enumerate(counters):
                calls[i] += 1
                assert actorrt.get(counter.inc.remote(), timeout=10) == calls[i]
        wait_for_new_head(s.head_pid)
        found = [actorrt.get_actor(f"counter-{i}") for i in range(3)]
        assert [actorrt.get(a.inc.remote(), timeout=10) for a in found] == [c + 1 for c in calls]
        assert _processes() == before
        assert [n["epoch"] for n in actorrt.nodes()] == epochs  # no node was restarted


def test_running_work_goes_on_while_the_head_stays_down_past_the_nodes_leases(cluster_with, monkeypatch):
    """With the head down for three leases' length, calls between actors go on (the store renews
    the leases), an actor without a name can be made, a name lookup raises HeadUnavailableError,
    and a named actor made during the outage comes up once the head is back."""
    monkeypatch.setattr(head_client, "HEAD_CALL_TIMEOUT_S", 1.0)
    with cluster_with(num_nodes=2, store_shards=1, heartbeat_timeout=4.0):  # a 2 s lease
        counter = Counter.options(node=1).remote()
        caller = Relay.options(node=0).remote(counter)
        assert actorrt.get(caller.inc.remote(), timeout=30) == 1
        calls, made = 1, {}
        with head_down():
            started = time.monotonic()
            while time.monotonic() - started < 6.0:
                calls += 1
                assert actorrt.get(caller.inc.remote(), timeout=10) == calls
            other = Counter.options(node=0).remote()
            assert actorrt.get(other.inc.remote(), timeout=10) == 1
            with pytest.raises(actorrt.HeadUnavailableError, match="down or restarting"):
                actorrt.get_actor("anything")
            monkeypatch.setattr(head_client, "HEAD_CALL_TIMEOUT_S", 30.0)
            maker = threading.Thread(target=lambda: made.update(actor=Counter.options(name="late").remote()))
            maker.start()
            time.sleep(0.5)
            assert maker.is_alive()  # waiting for the head to take its name
            for _ in range(20):  # and the driver's other calls do not wait behind it
                calls += 1
                assert actorrt.get(caller.inc.remote(), timeout=2) == calls
        maker.join(30)
        assert actorrt.get(made["actor"].inc.remote(), timeout=10) == 1
        assert actorrt.get(actorrt.get_actor("late").inc.remote(), timeout=10) == 2
        assert actorrt.get(caller.inc.remote(), timeout=10) == calls + 1


def test_a_node_killed_while_the_head_is_down_is_recovered_once_it_returns(cluster_with):
    """A node dies while no head runs: its actors are rebuilt, by replay and exactly once, when the
    head is back; what waited on them completes."""
    with cluster_with(num_nodes=2, store_shards=1):
        counter = Counter.options(node=1).remote()
        calls = 50
        assert actorrt.get([counter.inc.remote() for _ in range(calls)], timeout=30)[-1] == calls
        node = actorrt.nodes()[1]
        with head_down():
            os.kill(node["pid"], signal.SIGKILL)
            pending = counter.inc.remote()
            time.sleep(1.0)
        assert actorrt.get(pending, timeout=60) == calls + 1
        after = actorrt.nodes()[1]
        assert after["state"] == "ALIVE" and after["epoch"] == node["epoch"] + 1
        assert actorrt.get(counter.inc.remote(), timeout=10) == calls + 2


def test_a_slot_the_dead_head_had_declared_dead_but_not_restarted_is_restarted_by_the_next(cluster_with):
    """The head dies between saving a node's death and starting its new process (the store says
    DEAD, with the dead process's pid): the next head starts the slot again, and its actors are
    rebuilt exactly."""

    async def mark_dead(slot: int) -> None:  # what that head left in the store
        view = context.current().worker.membership.view
        store = store_of_view(view, None)
        try:
            state = HeadState(store)
            saved = (await state.resume()).view
            next(n for n in saved.nodes if n.slot == slot).state = head_pb2.DEAD
            await state.save_view(saved)
        finally:
            await store.aclose()

    with cluster_with(num_nodes=2, store_shards=1):
        counter = Counter.options(node=1).remote()
        assert actorrt.get([counter.inc.remote() for _ in range(20)], timeout=30)[-1] == 20
        node = actorrt.nodes()[1]
        with head_down():
            os.kill(node["pid"], signal.SIGKILL)
            asyncio.run(mark_dead(1))
        _wait_for(lambda: (n := actorrt.nodes()[1])["state"] == "ALIVE" and n["epoch"] == node["epoch"] + 1, 30.0,
                  f"node 1 was not restarted: {actorrt.nodes()}")
        assert actorrt.get(counter.inc.remote(), timeout=30) == 21


def test_the_head_killed_during_a_recovery_leaves_one_incarnation_and_no_process_behind(cluster_with):
    """The head dies right after a node's failure, while the node restarts and replays: the
    restarted head finishes the recovery; each actor runs once, exactly where it was; after the
    shutdown no process of the cluster is left."""
    with cluster_with(num_nodes=2, store_shards=1):
        counters = [Counter.options(node=1).remote() for _ in range(3)]
        calls = 300
        for counter in counters:
            assert actorrt.get([counter.inc.remote() for _ in range(calls)], timeout=60)[-1] == calls
        s = cluster_session()
        seen = {s.head_pid, *children_of(s.supervisor_pid)}
        actorrt.kill_node(1)
        os.kill(s.head_pid, signal.SIGKILL)
        assert actorrt.get([c.inc.remote() for c in counters], timeout=60) == [calls + 1] * 3
        wait_for_new_head(s.head_pid)
        seen |= children_of(s.supervisor_pid)
        stats = actorrt.stats()
        hosted = [a["actor_id"] for n in stats["nodes"] if n["state"] == "ALIVE" for a in n["actors"]
                  if a["class"].endswith("Counter")]
        assert sorted(hosted) == sorted({c.actor_id.hex() for c in counters})  # one incarnation each
        assert actorrt.get([c.inc.remote() for c in counters], timeout=30) == [calls + 2] * 3
    _wait_for(lambda: not any(process_alive(pid) for pid in seen), 15.0,
              f"left running: {[pid for pid in seen if process_alive(pid)]}")


def test_a_streaming_flow_counts_every_word_once_through_a_head_kill_and_then_a_node_kill(cluster_with):
    """A keyed word count runs while the head is SIGKILLed, and later a node (recovered by the
    restarted head): the run raises nothing and its counts equal the oracle's."""
    text = [f"w{i % 7} w{i % 3} x{i % 11}" for i in range(3000)]
    oracle = collections.Counter(w for line in text for w in line.split())
    with cluster_with(num_nodes=2, store_shards=1):
        heads = []

        def source():
            for i, line in enumerate(text):
                if i == 1000:
                    heads.append(cluster_session().head_pid)
                    os.kill(heads[0], signal.SIGKILL)
                if i == 2000:
                    heads.append(wait_for_new_head(heads[0]).head_pid)
                    actorrt.kill_node(1)
                if i % 50 == 0:
                    time.sleep(0.005)
                yield line

        flow = Dataflow("wordcount", batch_size=20, max_in_flight=4)
        (flow.source(source())
         .flat_map(str.split, parallelism=2)
         .key_by(lambda word: word)
         .fold(lambda: 0, lambda n, word: n + 1, parallelism=2)
         .collect())
        final = dict(flow.run(timeout=120).outputs)
        assert final == oracle
        assert len(set(heads)) == 2  # the head was restarted before the node was killed


def test_a_head_stopped_past_its_supervisors_patience_is_replaced_and_never_runs_again(cluster_with):
    """The head is SIGSTOPped: its supervisor, which hears from it twice a second, kills it after
    five silent seconds and starts another, so there are never two heads; calls between actors go
    on throughout (the nodes' leases come from the store), and the new head finds every node alive."""
    with cluster_with(num_nodes=2, store_shards=1, heartbeat_timeout=4.0):
        counter = Counter.options(node=1).remote()
        caller = Relay.options(node=0).remote(counter)
        epochs = [n["epoch"] for n in actorrt.nodes()]
        s = cluster_session()
        os.kill(s.head_pid, signal.SIGSTOP)
        calls, stopped_at = 0, time.monotonic()
        while cluster_session().head_pid == s.head_pid:
            assert time.monotonic() - stopped_at < 30, "the stopped head was not replaced"
            calls += 1
            assert actorrt.get(caller.inc.remote(), timeout=10) == calls
        assert time.monotonic() - stopped_at >= 4.0  # it was given its time
        _wait_for(lambda: not process_alive(s.head_pid), 10.0, "the stopped head still exists")
        assert actorrt.get(caller.inc.remote(), timeout=10) == calls + 1
        time.sleep(5.0)  # past a heartbeat timeout of the new head's: no node is declared dead
        nodes = actorrt.nodes()
        assert [n["epoch"] for n in nodes] == epochs, nodes  # (each names its last failure, and why)
        assert all(n["state"] == "ALIVE" for n in nodes), nodes


def test_a_collective_training_run_through_a_head_kill_and_then_a_node_kill_ends_bit_identical(cluster_with):
    """Stateful members allreduce their gradients call after call while the head is SIGKILLed, and
    later a node (recovered by the restarted head): every member ends bit-identical to numpy's."""
    from tests.integration.test_collective_recovery import CALLS, oracle, run, start_group

    with cluster_with(num_nodes=2, store_shards=1):
        members = start_group()
        run(members, range(3))
        s = cluster_session()
        os.kill(s.head_pid, signal.SIGKILL)
        run(members, range(3, 6))  # with the head down or restarting
        wait_for_new_head(s.head_pid)
        actorrt.kill_node(1)
        run(members, range(6, CALLS))
        states = actorrt.get([m.state_bytes.remote() for m in members], timeout=60)
    assert states == oracle(CALLS)


def test_the_head_soak_script_passes_a_short_seeded_round():
    """``scripts/head_soak.py`` as a user runs it (its own process and cluster), briefly: two head
    kills and a node kill under load, every answer checked against the callers' own counts."""
    script = Path(__file__).parents[2] / "scripts" / "head_soak.py"
    ran = subprocess.run([sys.executable, str(script), "--minutes", "0.2", "--head-kills", "2", "--counters", "2",
                          "--seed", "3"], capture_output=True, text=True, timeout=240)
    assert ran.returncode == 0 and "PASS" in ran.stdout, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "through 2 head kills and 1 node kills" in ran.stdout
