"""Large objects between processes: throughput of a numpy array at 1, 10, 100 and 1000 MB.

Paths, each timed from the call until the receiver has the array (it returns ``x[0] + x[-1]``,
touching the data at both ends and no more, as a task that maps its input would):
- ``driver->actor``: the array as the argument of a call to an actor;
- ``actor->actor``: an actor's result, passed by ref to an actor on the other node, which fetches
  it (time: the consumer's call, the producer's result already made);
- ``made->actor``: the same, timed from the producer's call (making the array and its result
  included) until the consumer has it;
- ``across hosts``: ``actor->actor`` to an actor on a third node whose host identity differs
  (``ACTORRT_HOST_ID``): it cannot map the others' memory and pulls the bytes over TCP, here on
  loopback (``tests/integration/test_cross_host.py`` runs the same path between two network
  namespaces and prints its rate);
- ``memcpy``: ``np.copyto`` of the same array into a preallocated one, in this process: the
  machine's copy speed in the same run, which every ratio below is read against.

actorrt runs each of ``--modes``: ``lineage_stash`` (the default ``ft``, what users run: each
argument is kept for the receiver's replay until its checkpoint) and ``none``; with ``--tls``, each
mode a second time with mutual TLS between all processes (a throwaway CA), and the table ends with
what TLS costs the bytes across hosts (the paths within a host move no bytes through sockets). With Ray installed
(``pip install ray==2.60.0``) in this Python, or in the one ``--ray-python`` names (run as a
subprocess), the same paths run on Ray actors in the same run.

Each figure: ``--warmup`` untimed calls of the size, then ``--repeat`` timed ones, for every
system alike; the table gives the best and the median of the timed calls, and the first call of
the size (cold: every system faults in fresh pages for it). For actorrt's ``driver->actor`` it also
counts the segments the driver faulted in on a call's path (``fresh``): none once warm, in either
mode. Writes ``bench/results/objects.json`` and ``objects.png``, and prints a table with the
targets.

Run: ``python bench/objects.py [--sizes 1,10,100,1000] [--repeat 5] [--warmup 5] [--modes lineage_stash,none]
[--no-ray | --ray-python PATH] [--quick] [--tls]``.
"""

from __future__ import annotations

import datetime as _dt
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import numpy as np
from ray_peer import DEFAULT_RAY_PYTHON, ray_figures
from run_meta import commit
from tls_env import tls_environment

MB = 1 << 20
RESULTS = Path(__file__).parent / "results"
PATHS = ("driver->actor", "actor->actor", "made->actor", "across hosts")
MODES = ("lineage_stash", "none")  # the default ft first
TARGETS = {  # (path, size MB) -> minimum ratio to Ray, of the medians, in every mode
    ("driver->actor", 100): 1.0,
    ("actor->actor", 100): 1.0,
    ("made->actor", 100): 1.0,
}
TARGET_VS_MEMCPY = ("driver->actor", 100, 0.5)
TARGET_ACROSS_HOSTS_GBPS = 0.5  # at 100 MB
Times = dict[str, float]  # first, best, median (seconds); fresh (segments a call faulted in)


class Sink:
    """Receives arrays (same code for actorrt and Ray)."""

    def ends(self, x: np.ndarray) -> float:
        return float(x[0] + x[-1])

    def make(self, nbytes: int) -> np.ndarray:
        return np.ones(nbytes // 8)

    def ready(self) -> bool:
        return True


def _summary(times: list[float], warmup: int) -> Times:
    timed = times[warmup:]
    return {"first": times[0], "best": min(timed), "median": statistics.median(timed)}


def _timed(fn: Callable[[], Any]) -> float:
    """Seconds ``fn`` took."""
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def memcpy_seconds(nbytes: int, repeat: int) -> float:
    src, dst = np.ones(nbytes // 8), np.empty(nbytes // 8)
    np.copyto(dst, src)  # first touch of dst
    return min(_timed(lambda: np.copyto(dst, src)) for _ in range(repeat))


def measure(remote: Any, get: Any, wait: Any, sizes: list[int], repeat: int, warmup: int,
            place: tuple[dict, dict] = ({}, {}), fresh: Callable[[], int] | None = None) -> dict[str, dict[int, Times]]:
    """The paths on one system, given its ``remote`` (a class to an actor class), ``get``,
    ``wait``, where to place the two actors, and (actorrt) how many segments the driver made."""
    sink = remote(Sink)
    a, b = sink.options(**place[0]).remote(), sink.options(**place[1]).remote()
    get([a.ready.remote(), b.ready.remote()])
    out: dict[str, dict[int, Times]] = {"driver->actor": {}, "actor->actor": {}, "made->actor": {}}
    calls = warmup + repeat
    for size in sizes:
        array = np.ones(size * MB // 8)
        times = [_timed(lambda array=array: get(a.ends.remote(array))) for _ in range(warmup)]
        before = fresh() if fresh else 0  # read between the calls, it would give spares time to be made
        times += [_timed(lambda array=array: get(a.ends.remote(array))) for _ in range(repeat)]
        out["driver->actor"][size] = _summary(times, warmup)
        if fresh:
            out["driver->actor"][size]["fresh"] = (fresh() - before) / repeat
        del array

        def fetch(size: int = size) -> float:
            ref = a.make.remote(size * MB)
            wait([ref])
            gc.collect()
            start = time.perf_counter()
            get(b.ends.remote(ref))
            return time.perf_counter() - start

        out["actor->actor"][size] = _summary([fetch() for _ in range(calls)], warmup)
        out["made->actor"][size] = _summary(
            [_timed(lambda size=size: get(b.ends.remote(a.make.remote(size * MB)))) for _ in range(calls)], warmup)
    return out


def run_actorrt(mode: str, sizes: list[int], repeat: int, warmup: int) -> dict[str, dict[int, Times]]:
    import actorrt

    actorrt.init(num_nodes=2, store_shards=1, ft=mode)
    other_host = _node_of_another_host()

    def fresh() -> int:
        return actorrt.stats()["driver"]["shared_memory"]["created"]

    try:
        out = measure(actorrt.remote, actorrt.get, actorrt.wait, sizes, repeat, warmup, ({"node": 0}, {"node": 1}),
                      fresh)
        across = measure(actorrt.remote, actorrt.get, actorrt.wait, sizes, repeat, warmup, ({"node": 0}, {"node": 2}))
        out["across hosts"] = across["actor->actor"]
        return out
    finally:
        actorrt.shutdown()
        other_host.kill()


def _node_of_another_host() -> subprocess.Popen:
    """A third node, on this machine but with another host identity (so objects reach it as bytes)."""
    import actorrt
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


def run_ray(sizes: list[int], repeat: int, warmup: int) -> dict[str, dict[int, Times]]:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    try:
        return measure(ray.remote, ray.get, ray.wait, sizes, repeat, warmup)  # every Ray actor is its own process
    finally:
        ray.shutdown()


def ray_results(sizes: list[int], repeat: int, warmup: int, ray_python: str) -> dict[str, dict[int, Times]] | None:
    """Ray's figures: in this process if it has Ray, else in ``ray_python`` (a subprocess); None
    if neither has it."""
    figures = ray_figures(lambda: run_ray(sizes, repeat, warmup), __file__,
                          ["--sizes", ",".join(map(str, sizes)), "--repeat", str(repeat), "--warmup", str(warmup)],
                          ray_python)
    return None if figures is None else {path: {int(s): t for s, t in by_size.items()}
                                         for path, by_size in figures.items()}


def _gbps(size_mb: int, seconds: float) -> float:
    return size_mb * MB / seconds / 1e9


def _plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = result["sizes_mb"]
    fig, ax = plt.subplots(figsize=(8, 5))
    styles = {"actorrt lineage_stash": "-", "actorrt none": ":", "ray": "--",
              "actorrt lineage_stash+tls": (0, (5, 1)), "actorrt none+tls": (0, (1, 3))}
    for system, style in styles.items():
        for path_name, colour in zip(PATHS, ("tab:blue", "tab:orange", "tab:red", "tab:green"), strict=True):
            times = result.get(system, {}).get(path_name)
            if times:
                ax.plot(sizes, [_gbps(s, times[str(s)]["median"]) for s in sizes], linestyle=style, color=colour,
                        marker="o", label=f"{system} {path_name}")
    ax.plot(sizes, [_gbps(s, result["memcpy"][str(s)]) for s in sizes], "-.", color="grey", label="memcpy")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("array size (MB)")
    ax.set_ylabel(f"GB/s (median of {result['repeat']}, after {result['warmup']} warm-up calls)")
    ax.set_title("Large objects between processes, one host")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _table(result: dict[str, Any]) -> None:
    systems = [k for k in result if k.startswith("actorrt ")] + (["ray"] if "ray" in result else [])
    print(f"{'path':<14}{'MB':>6}{'system':>23}{'first':>9}{'best':>9}{'median':>9}  GB/s (median)"
          f"{'fresh':>7}{'/ none':>8}{'/ Ray':>7}")
    for path_name in PATHS:
        for s in result["sizes_mb"]:
            for system in systems:
                t = result[system].get(path_name, {}).get(str(s))
                if t is None:
                    continue
                none = result.get("actorrt none", {}).get(path_name, {}).get(str(s))
                ray = result.get("ray", {}).get(path_name, {}).get(str(s))
                vs_none = f"{none['median'] / t['median']:.2f}" if none and system != "actorrt none" else ""
                vs_ray = f"{ray['median'] / t['median']:.2f}" if ray and system != "ray" else ""
                fresh = f"{t['fresh']:.1f}" if "fresh" in t else ""
                print(f"{path_name:<14}{s:>6}{system:>23}{t['first'] * 1e3:>7.1f}ms{t['best'] * 1e3:>7.1f}ms"
                      f"{t['median'] * 1e3:>7.1f}ms{_gbps(s, t['median']):>15.2f}{fresh:>7}{vs_none:>8}{vs_ray:>7}")
    print("targets (against Ray: ratios of the medians):")
    for (path_name, s), minimum in TARGETS.items():
        if s not in result["sizes_mb"] or "ray" not in result:
            continue
        for system in systems[:-1]:
            ratio = result["ray"][path_name][str(s)]["median"] / result[system][path_name][str(s)]["median"]
            print(f"  {system} {path_name} {s} MB vs Ray: {ratio:.2f} (target >= {minimum}) "
                  f"{'met' if ratio >= minimum else 'MISSED'}")
    path_name, s, minimum = TARGET_VS_MEMCPY
    if s in result["sizes_mb"]:
        for system in [k for k in systems if k != "ray"]:
            ratio = result["memcpy"][str(s)] / result[system][path_name][str(s)]["best"]  # both a best
            print(f"  {system} {path_name} {s} MB vs memcpy (best): {ratio:.2f} (target >= {minimum}) "
                  f"{'met' if ratio >= minimum else 'MISSED'}")
            rate = _gbps(100, result[system]["across hosts"]["100"]["median"])
            print(f"  {system} across hosts 100 MB: {rate:.2f} GB/s (target >= {TARGET_ACROSS_HOSTS_GBPS}) "
                  f"{'met' if rate >= TARGET_ACROSS_HOSTS_GBPS else 'MISSED'}")
    for system in [k for k in systems if k.endswith("+tls")]:
        plain = result[system.removesuffix("+tls")]["across hosts"]
        for s in result["sizes_mb"]:
            t, p = result[system]["across hosts"][str(s)], plain[str(s)]
            print(f"TLS cost, {system.removesuffix('+tls')} across hosts {s} MB: {_gbps(s, p['median']):.2f} GB/s "
                  f"plaintext, {_gbps(s, t['median']):.2f} GB/s TLS ({t['median'] / p['median']:.2f}x the time)")


@click.command()
@click.option("--sizes", default="1,10,100,1000", show_default=True, help="Array sizes in MB, comma-separated.")
@click.option("--repeat", default=5, show_default=True, help="Timed calls per figure.")
@click.option("--warmup", default=5, show_default=True, help="Untimed calls of each size before them.")
@click.option("--modes", default=",".join(MODES), show_default=True, help="actorrt's ft modes, comma-separated.")
@click.option("--ray/--no-ray", "with_ray", default=True, show_default=True, help="Run Ray too, if installed.")
@click.option("--ray-python", default=DEFAULT_RAY_PYTHON,
              show_default=True, help="A Python with Ray, run as a subprocess when this one has none.")
@click.option("--ray-only", is_flag=True, hidden=True, help="Print Ray's figures as JSON (the subprocess).")
@click.option("--quick", is_flag=True, help="1, 10 and 100 MB, 3 warm-up and 3 timed calls.")
@click.option("--tls", is_flag=True, help="Run each mode again with mutual TLS between all processes.")
def main(sizes: str, repeat: int, warmup: int, modes: str, with_ray: bool, ray_python: str, ray_only: bool,
         quick: bool, tls: bool) -> None:
    size_list = [1, 10, 100] if quick else [int(s) for s in sizes.split(",")]
    repeat, warmup = (3, 3) if quick else (repeat, warmup)
    if ray_only:
        print(json.dumps(run_ray(size_list, repeat, warmup)))
        return
    result: dict[str, Any] = {
        "when": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), "commit": commit(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "sizes_mb": size_list, "repeat": repeat, "warmup": warmup,
        "memcpy": {str(s): memcpy_seconds(s * MB, repeat) for s in size_list},
    }
    for mode in [m.strip() for m in modes.split(",") if m.strip()]:
        times = run_actorrt(mode, size_list, repeat, warmup)
        result[f"actorrt {mode}"] = {k: {str(s): t for s, t in v.items()} for k, v in times.items()}
        if tls:
            with tls_environment():
                times = run_actorrt(mode, size_list, repeat, warmup)
            result[f"actorrt {mode}+tls"] = {k: {str(s): t for s, t in v.items()} for k, v in times.items()}
    ray = ray_results(size_list, repeat, warmup, ray_python) if with_ray else None
    if ray is not None:
        result["ray"] = {k: {str(s): t for s, t in v.items()} for k, v in ray.items()}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "objects.json").write_text(json.dumps(result, indent=2))
    _plot(result, RESULTS / "objects.png")
    _table(result)
    print(f"wrote {RESULTS / 'objects.json'} and {RESULTS / 'objects.png'}")


if __name__ == "__main__":
    sys.exit(main())
