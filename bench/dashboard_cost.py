"""What serving the dashboard costs the head, with a page open while a dataflow runs.

For each mode (the default ``lineage_stash``, and ``none`` beside it), one embedded cluster of two
nodes with the dashboard on, and a fed wordcount-like flow (a map and a keyed fold, two instances
each) taking ``--rate`` records a second from a driver thread. The head's CPU (its process's user
and system time from ``/proc``, over wall time) is measured in windows of ``--window`` seconds,
under three conditions taken in turn, ``--rounds`` times (so drift in the machine's load falls on
all three alike):

- **closed**: no page open (the dashboard still samples the head's stats once a second);
- **flows page**: headless Chromium on the flows page (a graph and two live charts a flow);
- **cluster page**: on the cluster page.

An open page of either kind makes the head read every store shard's ``INFO`` and send the page
a snapshot of all pages once a second. Before it, the same cluster and flow run without the
dashboard (**off**, ``--rounds`` windows): ``closed - off`` is the sampler's cost, a difference of
two clusters' runs and so noisier than the others.

Target (the issue's): serving the dashboard costs the head under 2% CPU with a page open, that is
a page's condition minus ``closed``, in percent of one core.

Writes ``bench/results/dashboard-cost-<time>.json`` and ``.png`` and prints a table.

Run: ``python bench/dashboard_cost.py [--rate 2000] [--window 10] [--rounds 3]`` (needs Chromium
and chromedriver: ``bash scripts/install-browser.sh``).
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from run_meta import run_meta

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the browser helper of the tests

import actorrt  # noqa: E402
from actorrt.streaming import Dataflow, Fed  # noqa: E402
from actorrt.testing import cluster_session  # noqa: E402
from actorrt.util.processes import stat_fields  # noqa: E402
from tests.support.browser import chromium, wait_for  # noqa: E402

RESULTS = Path(__file__).parent / "results"
CONDITIONS = ("closed", "flows page", "cluster page")
SHOWN = ("off", *CONDITIONS)
PAGES = {"flows page": "#/flows", "cluster page": "#/cluster"}
BATCH = 50
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """The process's user and system CPU time so far (utime and stime, in clock ticks)."""
    fields = stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / _TICK


class Feeder:
    """A driver thread feeding the flow ``rate`` records a second, in batches of ``BATCH``."""

    def __init__(self, running, rate: float) -> None:
        self.running, self.rate, self.fed = running, rate, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        start = time.monotonic()
        while not self._stop.is_set():
            self.running.feed(list(range(self.fed, self.fed + BATCH)))
            self.fed += BATCH
            time.sleep(max(0.0, start + self.fed / self.rate - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def head_cpu_percent(head_pid: int, window: float) -> float:
    cpu0, t0 = cpu_seconds(head_pid), time.monotonic()
    time.sleep(window)
    return 100 * (cpu_seconds(head_pid) - cpu0) / (time.monotonic() - t0)


@contextlib.contextmanager
def flow_running(ft: str, rate: float, dashboard: bool) -> Iterator[tuple[int, str]]:
    """A two-node cluster running the fed flow: (its head's pid, the dashboard's login link or "")."""
    info = actorrt.init(num_nodes=2, store_shards=2, ft=ft, dashboard_port=0 if dashboard else None)
    flow = Dataflow("cost", batch_size=BATCH, max_in_flight=8)
    (flow.source(Fed()).map(lambda n: (n % 100, 1), parallelism=2)
     .key_by(lambda kv: kv[0]).fold(lambda: 0, lambda total, kv: total + kv[1], parallelism=2).collect())
    running = flow.start()
    feeder = Feeder(running, rate)
    try:
        time.sleep(3.0)  # the flow settles
        yield cluster_session().head_pid, info.get("dashboard_url", "")
    finally:
        feeder.stop()
        running.finish(timeout=120)
        actorrt.shutdown()


def measure(ft: str, rate: float, window: float, rounds: int) -> dict[str, Any]:
    samples: dict[str, list[float]] = {c: [] for c in SHOWN}
    with flow_running(ft, rate, dashboard=False) as (head_pid, _):
        samples["off"] = [head_cpu_percent(head_pid, window) for _ in range(rounds)]
    with flow_running(ft, rate, dashboard=True) as (head_pid, link), chromium() as chrome:
        chrome.get(link)  # logs in
        base = link.split("?")[0]
        for _ in range(rounds):
            for condition in CONDITIONS:
                chrome.get(base + PAGES[condition] if condition in PAGES else "about:blank")
                if condition in PAGES:  # its event stream delivers
                    wait_for(chrome, lambda c: c.execute_script(
                        "return document.getElementById('live').dataset.state") == "live")
                time.sleep(1.0)
                samples[condition].append(head_cpu_percent(head_pid, window))
    medians = {c: statistics.median(v) for c, v in samples.items()}
    return {"ft": ft, "samples": samples, "median_cpu_percent": medians,
            "page_cost_percent": {c: medians[c] - medians["closed"] for c in PAGES},
            "sampler_cost_percent": medians["closed"] - medians["off"]}


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / len(results)
    for i, r in enumerate(results):
        xs = [j + i * width for j in range(len(SHOWN))]
        ax.bar(xs, [r["median_cpu_percent"][c] for c in SHOWN], width, label=f'ft="{r["ft"]}"')
    ax.set_xticks([j + width * (len(results) - 1) / 2 for j in range(len(SHOWN))], SHOWN)
    ax.set_ylabel("head CPU, % of one core (median)")
    ax.set_title("The head's CPU: no dashboard, dashboard closed, a page open; a flow running")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


@click.command()
@click.option("--rate", default=2000.0, show_default=True, help="Records a second fed to the flow.")
@click.option("--window", default=10.0, show_default=True, help="Seconds of each measurement.")
@click.option("--rounds", default=3, show_default=True, help="Rounds of the three conditions.")
@click.option("--modes", default="lineage_stash,none", show_default=True, help="Modes, comma-separated.")
@click.option("--out", default=RESULTS, type=click.Path(file_okay=False, path_type=Path), show_default=True)
def main(rate: float, window: float, rounds: int, modes: str, out: Path) -> None:
    results = [measure(ft, rate, window, rounds) for ft in modes.split(",")]
    stamp, meta = run_meta(rate=rate, window=window, rounds=rounds)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"dashboard-cost-{stamp}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    plot(results, out / f"dashboard-cost-{stamp}.png")
    print("head CPU, % of one core (medians):")
    print(f"{'ft':<15}{'off':>8}{'closed':>10}{'flows page':>13}{'cluster page':>15}{'page cost (max)':>18}"
          f"{'sampler':>10}  target: page cost < 2%")
    for r in results:
        m, cost = r["median_cpu_percent"], max(r["page_cost_percent"].values())
        print(f"{r['ft']:<15}{m['off']:>7.2f}%{m['closed']:>9.2f}%{m['flows page']:>12.2f}%{m['cluster page']:>14.2f}%"
              f"{cost:>17.2f}%{r['sampler_cost_percent']:>9.2f}%  {'met' if cost < 2.0 else 'missed'}")
    print(f"results: {out / f'dashboard-cost-{stamp}.json'}")


if __name__ == "__main__":
    main()
