"""The head's failure, measured: running work while no head runs, control operations after a kill,
and a restarted head reading back a cluster of many named actors.

For each mode (the default ``lineage_stash``, and ``none`` beside it), one embedded cluster of two
nodes with ``--actors`` named actors (10,000 by default):

- **throughput**: a driver keeps 20 calls in flight through a caller actor to a counter actor on
  the other node (each call one actor-to-actor hop). Calls completed per second over ``--window``
  seconds before the outage, during it (the head SIGKILLed and kept down: its supervisor is
  SIGSTOPped for ``--outage`` seconds, past the nodes' leases), and after it (from two seconds
  after the restarted head serves);
- **control back**: the head SIGKILLed with its supervisor running: seconds until
  ``get_actor`` answers again (the restart, the read-back of the state, the reconnection);
- **read-back**: the restarted head's own time to read the state back from the store, from its log;
- with ``--standby``, **standby control back**: a cluster on an external store (a redis-server
  started here) with a standby head under another host identity; the active head's whole host
  (supervisor, head, nodes) SIGKILLed: seconds until ``get_actor`` answers through the standby,
  and until a call to an actor of the lost host returns (rebuilt there from its lineage).

Targets (the issue's): throughput during the outage >= 0.9x before; control back <= 2 s (restart)
or the head's lease + 1 s (standby); the directory of 10,000 actors read back within 2 s.

Writes ``bench/results/head-failover-<time>.json`` and ``.png`` and prints a table.

Run: ``python bench/head_failover.py [--actors 10000] [--outage 8] [--window 3] [--standby]``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

import click
from run_meta import run_meta

import actorrt
from actorrt.cluster import leadership, session
from actorrt.cluster.head_options import HeadOptions
from actorrt.cluster.launch import start_head
from actorrt.core import context
from actorrt.lineage.options import FaultToleranceOptions
from actorrt.objects.host import HOST_ID_ENV
from actorrt.store.redis_server import RedisShard
from actorrt.testing import Counter, Relay, children_of, cluster_session, wait_for_new_head

RESULTS = Path(__file__).parent / "results"
IN_FLIGHT = 20
SETTLE_S = 2.0


class Load:
    """A driver thread keeping IN_FLIGHT calls going; records when each batch completed."""

    def __init__(self, caller) -> None:
        self.caller = caller
        self.done: list[tuple[float, int]] = []  # (time, calls completed in the batch)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            actorrt.get([self.caller.inc.remote() for _ in range(IN_FLIGHT)], timeout=60)
            self.done.append((time.monotonic(), IN_FLIGHT))

    def rate(self, start: float, end: float) -> float:
        return sum(n for t, n in self.done if start <= t < end) / (end - start)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def _read_back_ms(log_path: Path) -> float:
    found = re.findall(r"read the cluster's state back .* in ([0-9.]+) ms", log_path.read_text())
    return float(found[-1]) if found else float("nan")


def measure(mode: str, actors: int, outage: float, window: float) -> dict[str, Any]:
    actorrt.init(num_nodes=2, store_shards=2, ft=mode)
    try:
        started = time.perf_counter()
        named = [Counter.options(name=f"actor-{i}", node=i % 2).remote() for i in range(actors)]
        actorrt.get([a.inc.remote() for a in named[-100:]], timeout=120)
        made_s = time.perf_counter() - started
        caller = Relay.options(node=0).remote(Counter.options(node=1).remote())
        load = Load(caller)
        time.sleep(window + 1.0)  # warm up, then the "before" window
        t0 = time.monotonic()
        s = cluster_session()
        os.kill(s.supervisor_pid, signal.SIGSTOP)
        os.kill(s.head_pid, signal.SIGKILL)
        time.sleep(outage)
        t1 = time.monotonic()
        os.kill(s.supervisor_pid, signal.SIGCONT)
        wait_for_new_head(s.head_pid)
        time.sleep(SETTLE_S + window)  # the restarted head's first seconds (its warm spare importing) apart
        t2 = time.monotonic()
        load.stop()
        before, during, after = load.rate(t0 - window, t0), load.rate(t0, t1), load.rate(t2 - window, t2)

        s = cluster_session()
        killed = time.perf_counter()
        os.kill(s.head_pid, signal.SIGKILL)
        time.sleep(0.05)
        assert actorrt.get_actor(f"actor-{actors - 1}") is not None
        control_back_s = time.perf_counter() - killed
        read_back_ms = _read_back_ms(context.current().head_process.log_path)
    finally:
        actorrt.shutdown()
    return {"mode": mode, "actors": actors, "actors_made_s": made_s, "calls_per_s_before": before,
            "calls_per_s_during": during, "calls_per_s_after": after, "during_over_before": during / before,
            "control_back_s": control_back_s, "read_back_ms": read_back_ms}


def _start_on_host(host: str, directory: Path, options: HeadOptions, **kwargs: Any) -> session.Session:
    os.environ[HOST_ID_ENV] = host  # what the head and its nodes take for their host identity
    try:
        return start_head(directory, options, **kwargs).session
    finally:
        del os.environ[HOST_ID_ENV]


def measure_standby(mode: str, workdir: Path) -> dict[str, Any]:
    import asyncio

    store = asyncio.run(RedisShard.start(workdir / "store", "pw"))
    options = HeadOptions(nodes=2, store_url=f"redis://:pw@{store.address}",
                          fault_tolerance=FaultToleranceOptions(mode))
    try:
        a = _start_on_host("a", workdir / "a", options)
        _start_on_host("b", workdir / "b", options, token=a.token, standby=True)
        os.environ[session.TOKEN_ENV] = a.token
        actorrt.init(address=a.head_address)
        try:
            counters = [Counter.options(name=f"c{i}", node=i).remote() for i in range(2)]
            actorrt.get([c.inc.remote() for c in counters for _ in range(10)], timeout=60)
            time.sleep(1.0)
            for pid in children_of(a.supervisor_pid) | {a.supervisor_pid}:
                os.kill(pid, signal.SIGKILL)
            killed = time.perf_counter()
            while True:
                try:
                    actorrt.get_actor("c0")
                    break
                except actorrt.ClusterError:
                    time.sleep(0.01)
            control_back_s = time.perf_counter() - killed
            calls_back_s = None  # with ft="none" the lost host's actors are gone for good
            if mode != "none":
                assert actorrt.get(actorrt.get_actor("c1").inc.remote(), timeout=120) == 11
                calls_back_s = time.perf_counter() - killed
        finally:
            actorrt.shutdown()
            os.environ.pop(session.TOKEN_ENV, None)
    finally:
        for d in (workdir / "b", workdir / "a"):
            if (s := session.read(d)) is not None:
                for pid in children_of(s.root_pid) | {s.root_pid}:
                    os.kill(pid, signal.SIGKILL)
        asyncio.run(store.stop())
    return {"mode": mode, "lease_s": leadership.LEADER_LEASE_S, "standby_control_back_s": control_back_s,
            "standby_calls_back_s": calls_back_s}


def _plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    phases = ["before", "during", "after"]
    width = 0.8 / len(results)
    for i, r in enumerate(results):
        ax.bar([p + i * width for p in range(3)], [r[f"calls_per_s_{p}"] for p in phases], width, label=r["mode"])
    ax.set_xticks([p + width * (len(results) - 1) / 2 for p in range(3)], [f"{p} the outage" for p in phases])
    ax.set_ylabel("actor-to-actor calls / s")
    ax.set_title("Running work while the head is down")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


@click.command()
@click.option("--actors", default=10_000, show_default=True, help="Named actors in the cluster.")
@click.option("--outage", default=8.0, show_default=True, help="Seconds the head stays down.")
@click.option("--window", default=3.0, show_default=True, help="Seconds of each throughput window.")
@click.option("--modes", default="lineage_stash,none", show_default=True)
@click.option("--standby", is_flag=True, help="Also measure a standby head's takeover of a lost host's cluster.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=RESULTS, show_default=True)
def main(actors: int, outage: float, window: float, modes: str, standby: bool, out: Path) -> None:
    results = [measure(mode, actors, outage, window) for mode in modes.split(",")]
    standbys = []
    if standby:
        import tempfile

        for mode in modes.split(","):
            with tempfile.TemporaryDirectory(prefix="actorrt-bench-standby-") as workdir:
                standbys.append(measure_standby(mode, Path(workdir)))
    print(f"{'mode':14s} {'before/s':>9s} {'during/s':>9s} {'after/s':>8s} {'during/before':>14s} "
          f"{'control back s':>15s} {'read-back ms':>13s}")
    for r in results:
        print(f"{r['mode']:14s} {r['calls_per_s_before']:>9.0f} {r['calls_per_s_during']:>9.0f} "
              f"{r['calls_per_s_after']:>8.0f} {r['during_over_before']:>13.2f}x {r['control_back_s']:>15.2f} "
              f"{r['read_back_ms']:>13.1f}")
    for r in standbys:
        calls = r["standby_calls_back_s"]
        print(f"{r['mode']:14s} standby: control back {r['standby_control_back_s']:.2f} s (target <= lease + 1 = "
              f"{r['lease_s'] + 1:g} s), a lost actor's call back "
              + (f"{calls:.2f} s" if calls is not None else "never (ft=none: its actors are gone)"))
    out.mkdir(parents=True, exist_ok=True)
    stamp, meta = run_meta(actors=actors, outage=outage, window=window)
    (out / f"head-failover-{stamp}.json").write_text(json.dumps({"meta": meta, "results": results,
                                                                 "standby": standbys}, indent=1))
    _plot(results, out / f"head-failover-{stamp}.png")
    print(f"wrote {out}/head-failover-{stamp}.json and .png")


if __name__ == "__main__":
    main()
