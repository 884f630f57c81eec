"""Soak the control plane: head kills under load, mixed with node kills, against a plain-Python count.

An embedded cluster of three nodes runs named counters, each called through a caller actor on
another node (actor-to-actor calls) by driver threads that check every answer against their own
count. A seeded schedule SIGKILLs the head ``--head-kills`` times over ``--minutes`` (some kills with
its supervisor held back for a few seconds, so the head stays down past the nodes' leases), and a
node between head kills. With ``--long-outage S`` the head is first kept down S seconds (60 in
the issue's scenario): the counts must go on all along, and an actor created meanwhile must come
up within seconds of the head's return. At the end every counter must equal the number of calls
made to it, every name must resolve, and the shutdown must leave no process behind.

Run: ``python scripts/head_soak.py [--minutes 10] [--head-kills 20] [--long-outage 60] [--seed 1]``.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import time

import click

import actorrt
from actorrt.testing import Counter, Relay, children_of, cluster_session, wait_for_new_head
from actorrt.util.processes import process_alive

NODES = 3


class Load:
    """A thread calling one counter through its caller, checking each answer against its count."""

    def __init__(self, caller, counter) -> None:
        self.caller, self.counter = caller, counter
        self.calls = 0
        self.longest = (0.0, 0.0)  # the longest wait for a batch of answers, and when it ended
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                sent = time.monotonic()
                refs = [self.caller.inc.remote() for _ in range(10)]
                got = actorrt.get(refs, timeout=120)
                self.longest = max(self.longest, (time.monotonic() - sent, time.monotonic()))
                expected = list(range(self.calls + 1, self.calls + 11))
                if got != expected:
                    raise AssertionError(f"answers {got}, expected {expected}")
                self.calls += 10
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(180)


def _kill_head(rng: random.Random, log) -> None:
    s = cluster_session()
    held = rng.random() < 0.3
    if held:
        os.kill(s.supervisor_pid, signal.SIGSTOP)
    os.kill(s.head_pid, signal.SIGKILL)
    if held:
        down = rng.uniform(2.0, 8.0)
        time.sleep(down)
        os.kill(s.supervisor_pid, signal.SIGCONT)
    now = wait_for_new_head(s.head_pid)
    log(f"head {s.head_pid} killed{f', kept down {down:.1f} s' if held else ''}; head {now.head_pid} serves")


def _long_outage(seconds: float, loads: list[Load], log) -> None:
    """The head down ``seconds`` (its supervisor held back); calls must go on throughout, and an
    actor named during the outage must come up soon after the head is back."""
    s = cluster_session()
    os.kill(s.supervisor_pid, signal.SIGSTOP)
    os.kill(s.head_pid, signal.SIGKILL)
    made: dict = {}
    maker = threading.Thread(target=lambda: made.update(actor=Counter.options(name="made-in-outage").remote()))
    try:
        before = sum(load.calls for load in loads)
        unnamed = Counter.remote()  # needs no head
        if actorrt.get(unnamed.inc.remote(), timeout=60) != 1:
            raise AssertionError("an actor made while the head was down did not count")
        # A name needs the head: its creation waits for it, up to HEAD_CALL_TIMEOUT_S (30 s).
        time.sleep(max(0.0, seconds - 10.0))
        maker.start()
        time.sleep(min(seconds, 10.0))
        during = sum(load.calls for load in loads) - before
        if during == 0 or any(load.error for load in loads):
            raise AssertionError(f"the calls stopped while the head was down: {[load.error for load in loads]}")
    finally:
        os.kill(s.supervisor_pid, signal.SIGCONT)
    back = time.monotonic()
    maker.join(60)
    if actorrt.get(made["actor"].inc.remote(), timeout=60) != 1:
        raise AssertionError("the actor made during the outage did not count")
    log(f"head down {seconds:.0f} s: {during} calls went on ({during / seconds:.0f}/s); the actor named "
        f"meanwhile served {time.monotonic() - back:.2f} s after the head came back")


@click.command()
@click.option("--minutes", default=10.0, show_default=True)
@click.option("--head-kills", default=20, show_default=True)
@click.option("--counters", default=6, show_default=True)
@click.option("--long-outage", default=0.0, show_default=True, help="Seconds of one outage first (0: none).")
@click.option("--seed", default=1, show_default=True)
def main(minutes: float, head_kills: int, counters: int, long_outage: float, seed: int) -> None:
    rng = random.Random(seed)
    started = time.monotonic()

    def log(message: str) -> None:
        print(f"[{time.monotonic() - started:7.1f} s] {message}", flush=True)

    actorrt.init(num_nodes=NODES, store_shards=2, heartbeat_timeout=4.0)
    seen: set[int] = set()
    try:
        # Checkpoints bound what a node's recovery replays (the calls since each actor's last one).
        named = [Counter.options(name=f"soak-{i}", node=i % NODES, checkpoint_every=1000).remote()
                 for i in range(counters)]
        loads = [Load(Relay.options(node=(i + 1) % NODES, checkpoint_every=1000).remote(counter), counter)
                 for i, counter in enumerate(named)]
        supervisor = cluster_session().supervisor_pid
        if long_outage:
            _long_outage(long_outage, loads, log)
        pause = minutes * 60 / head_kills
        for k in range(head_kills):
            time.sleep(rng.uniform(0.5, 1.5) * pause / 2)
            seen |= children_of(supervisor) | {cluster_session().head_pid}
            _kill_head(rng, log)
            time.sleep(rng.uniform(0.5, 1.5) * pause / 2)
            if k % 2 == 1:
                slot = rng.randrange(NODES)
                actorrt.kill_node(slot)
                log(f"node {slot} killed")
            if failed := [load.error for load in loads if load.error]:
                raise AssertionError(f"a load failed: {failed[0]!r}") from failed[0]
            wait, when = max(load.longest for load in loads)
            log(f"{sum(load.calls for load in loads)} calls so far, all answers as counted; the longest wait "
                f"for answers {wait:.2f} s (at {when - started:.1f} s)")
        for load in loads:
            load.stop()
        log("load stopped")
        if failed := [load.error for load in loads if load.error]:
            raise AssertionError(f"a load failed: {failed[0]!r}") from failed[0]
        values = actorrt.get([actorrt.get_actor(f"soak-{i}").value.remote() for i in range(counters)], timeout=60)
        calls = [load.calls for load in loads]
        if values != calls:
            raise AssertionError(f"counters {values}, calls made {calls}")
        seen |= children_of(supervisor)
        log(f"{sum(calls)} calls, each counted once, through {head_kills} head kills and "
            f"{head_kills // 2} node kills")
    finally:
        actorrt.shutdown()
    deadline = time.monotonic() + 15
    while (left := [pid for pid in seen if process_alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    if left:
        sys.exit(f"processes left behind: {left}")
    log("nothing left behind: PASS")


if __name__ == "__main__":
    main()
