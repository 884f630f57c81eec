"""Large objects between processes: throughput of a numpy array at 1, 10, 100 and 1000 MB.

Paths, each timed from the call until the receiver has the array (it returns ``x[0] + x[-1]``,
touching the data at both ends and no more, as a task that maps its input would):
- ``driver->actor``: the array as the argument of a call to an actor;
- ``actor->actor``: an actor's result, passed by ref to an actor on the other node, which fetches
  it (time: the consumer's call, the producer's result already made);
- ``across hosts``: the same, to an actor on a third node whose host identity differs
  (``ACTORRT_HOST_ID``): it cannot map the others' memory and pulls the bytes over TCP, here on
  loopback (``tests/integration/test_cross_host.py`` runs the same path between two network
  namespaces and prints its rate);
- ``memcpy``: ``np.copyto`` of the same array into a preallocated one, in this process: the
  machine's copy speed in the same run, which every ratio below is read against.

With Ray installed (``pip install ray==2.60.0``) the same paths run on Ray actors in the same run.
Each figure is the best of ``--repeat`` runs (the machine is shared and noisy). Writes
``bench/results/objects.json`` and ``objects.png``, and prints a table with the issue's targets.

Run: ``python bench/objects.py [--sizes 1,10,100,1000] [--repeat 3] [--no-ray] [--quick]``.
"""

from __future__ import annotations

import datetime as _dt
import gc
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click
import numpy as np
from run_meta import commit

import actorrt

MB = 1 << 20
RESULTS = Path(__file__).parent / "results"
TARGETS = {  # (path, size MB) -> (what, minimum ratio)
    ("driver->actor", 100): ("vs Ray", 0.8),
    ("actor->actor", 100): ("vs Ray", 1.0),
}
TARGET_VS_MEMCPY = ("driver->actor", 100, 0.5)
TARGET_ACROSS_HOSTS_GBPS = 0.5  # at 100 MB


class Sink:
    """Receives arrays (same code for actorrt and Ray)."""

    def ends(self, x: np.ndarray) -> float:
        return float(x[0] + x[-1])

    def make(self, nbytes: int) -> np.ndarray:
        return np.ones(nbytes // 8)

    def ready(self) -> bool:
        return True


def _best(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def memcpy_seconds(nbytes: int, repeat: int) -> float:
    src, dst = np.ones(nbytes // 8), np.empty(nbytes // 8)
    np.copyto(dst, src)  # first touch of dst
    return _best(lambda: np.copyto(dst, src), repeat)


def measure(remote: Any, get: Any, wait: Any, sizes: list[int], repeat: int,
            place: tuple[dict, dict] = ({}, {})) -> dict[str, dict[int, float]]:
    """Both paths on one system, given its ``remote`` (a class to an actor class), ``get``,
    ``wait``, and where to place the two actors."""
    sink = remote(Sink)
    a, b = sink.options(**place[0]).remote(), sink.options(**place[1]).remote()
    get([a.ready.remote(), b.ready.remote()])
    out: dict[str, dict[int, float]] = {"driver->actor": {}, "actor->actor": {}}
    for size in sizes:
        array = np.ones(size * MB // 8)
        out["driver->actor"][size] = _best(lambda array=array: get(a.ends.remote(array)), repeat)
        del array

        def fetch(size: int = size) -> float:
            ref = a.make.remote(size * MB)
            wait([ref])
            start = time.perf_counter()
            get(b.ends.remote(ref))
            return time.perf_counter() - start

        out["actor->actor"][size] = min(fetch() for _ in range(repeat))
    return out


def run_actorrt(sizes: list[int], repeat: int) -> dict[str, dict[int, float]]:
    actorrt.init(num_nodes=2, store_shards=1, ft="none")
    other_host = _node_of_another_host()
    try:
        out = measure(actorrt.remote, actorrt.get, actorrt.wait, sizes, repeat, ({"node": 0}, {"node": 1}))
        across = measure(actorrt.remote, actorrt.get, actorrt.wait, sizes, repeat, ({"node": 0}, {"node": 2}))
        out["across hosts"] = across["actor->actor"]
        return out
    finally:
        actorrt.shutdown()
        other_host.kill()


def _node_of_another_host() -> subprocess.Popen:
    """A third node, on this machine but with another host identity (so objects reach it as bytes)."""
    from actorrt.cluster.session import TOKEN_ENV
    from actorrt.core import context

    session = context.current().head_process.session
    node = subprocess.Popen([sys.executable, "-m", "actorrt.cluster.node", "--head", session.head_address],
                            env=dict(os.environ, **{TOKEN_ENV: session.token, "ACTORRT_HOST_ID": "bench-elsewhere"}),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while len([n for n in actorrt.nodes() if n["state"] == "ALIVE"]) < 3:
        if time.monotonic() > deadline:
            raise RuntimeError("the third node did not come up")
        time.sleep(0.1)
    return node


def run_ray(sizes: list[int], repeat: int) -> dict[str, dict[int, float]]:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    try:
        return measure(ray.remote, ray.get, ray.wait, sizes, repeat)  # every Ray actor is its own process
    finally:
        ray.shutdown()


def ray_installed() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def _gbps(size_mb: int, seconds: float) -> float:
    return size_mb * MB / seconds / 1e9


def _plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = result["sizes_mb"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for system, style in (("actorrt", "-"), ("ray", "--")):
        for path_name, colour in (("driver->actor", "tab:blue"), ("actor->actor", "tab:orange"),
                                  ("across hosts", "tab:green")):
            seconds = result.get(system, {}).get(path_name)
            if seconds:
                ax.plot(sizes, [_gbps(s, seconds[str(s)]) for s in sizes], style, color=colour, marker="o",
                        label=f"{system} {path_name}")
    ax.plot(sizes, [_gbps(s, result["memcpy"][str(s)]) for s in sizes], ":", color="grey", label="memcpy")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("array size (MB)")
    ax.set_ylabel(f"GB/s (best of {result['repeat']})")
    ax.set_title("Large objects between processes, one host")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


@click.command()
@click.option("--sizes", default="1,10,100,1000", show_default=True, help="Array sizes in MB, comma-separated.")
@click.option("--repeat", default=3, show_default=True, help="Runs per figure; the best counts.")
@click.option("--ray/--no-ray", "with_ray", default=True, show_default=True, help="Run Ray too, if installed.")
@click.option("--quick", is_flag=True, help="1, 10 and 100 MB, best of 2.")
def main(sizes: str, repeat: int, with_ray: bool, quick: bool) -> None:
    size_list = [1, 10, 100] if quick else [int(s) for s in sizes.split(",")]
    repeat = 2 if quick else repeat
    result: dict[str, Any] = {
        "when": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), "commit": commit(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "sizes_mb": size_list, "repeat": repeat,
        "memcpy": {str(s): memcpy_seconds(s * MB, repeat) for s in size_list},
    }
    result["actorrt"] = {k: {str(s): t for s, t in v.items()} for k, v in run_actorrt(size_list, repeat).items()}
    if with_ray and ray_installed():
        result["ray"] = {k: {str(s): t for s, t in v.items()} for k, v in run_ray(size_list, repeat).items()}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "objects.json").write_text(json.dumps(result, indent=2))
    _plot(result, RESULTS / "objects.png")

    print(f"{'path':<15}{'MB':>6}{'actorrt GB/s':>14}{'Ray GB/s':>10}{'vs Ray':>8}{'vs memcpy':>11}")
    for path_name in ("driver->actor", "actor->actor", "across hosts"):
        for s in size_list:
            ours = _gbps(s, result["actorrt"][path_name][str(s)])
            ray_s = result.get("ray", {}).get(path_name, {}).get(str(s))
            theirs = _gbps(s, ray_s) if ray_s else None
            copy = _gbps(s, result["memcpy"][str(s)])
            print(f"{path_name:<15}{s:>6}{ours:>14.2f}{theirs or float('nan'):>10.2f}"
                  f"{(ours / theirs) if theirs else float('nan'):>8.2f}{ours / copy:>11.2f}")
    print("targets:")
    for (path_name, s), (what, minimum) in TARGETS.items():
        if s in size_list and "ray" in result:
            ratio = result["ray"][path_name][str(s)] / result["actorrt"][path_name][str(s)]
            print(f"  {path_name} {s} MB {what}: {ratio:.2f} (target >= {minimum}) "
                  f"{'met' if ratio >= minimum else 'MISSED'}")
    path_name, s, minimum = TARGET_VS_MEMCPY
    if s in size_list:
        ratio = result["memcpy"][str(s)] / result["actorrt"][path_name][str(s)]
        verdict = "met" if ratio >= minimum else "MISSED"
        print(f"  {path_name} {s} MB vs memcpy: {ratio:.2f} (target >= {minimum}) {verdict}")
    if 100 in size_list:
        rate = _gbps(100, result["actorrt"]["across hosts"]["100"])
        verdict = "met" if rate >= TARGET_ACROSS_HOSTS_GBPS else "MISSED"
        print(f"  across hosts 100 MB: {rate:.2f} GB/s (target >= {TARGET_ACROSS_HOSTS_GBPS}) {verdict}")
    print(f"wrote {RESULTS / 'objects.json'} and {RESULTS / 'objects.png'}")


if __name__ == "__main__":
    sys.exit(main())
