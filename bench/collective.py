"""Allreduce time against size (paper Fig. 12a): actorrt.collective under each fault-tolerance
mode, against torch.distributed's gloo backend, in one run.

Four members on two nodes (two processes, two members each) allreduce float32 arrays of 1, 10 and
100 MB (sum). Each member times its own calls; a call's time is the slowest member's, and each
figure is the median over ``--calls`` calls after a warm-up. Modes:

- ``none``: no lineage is logged;
- ``lineage_stash``: each call is one logged event of each member (flushed off the critical path),
  and its result is kept until the members' checkpoints cover it: the members checkpoint every
  ``--checkpoint-every`` calls, as a training job does, which lets the kept results go back to
  their process's pool. The warm-up is one such interval. With ``--checkpoint-every 0`` the
  members never checkpoint but when what is kept for them passes a quarter of the pinned budget
  (a memory-pressure checkpoint): kept results take pooled segments, pre-faulted beside the calls
  while they are kept (``objects/arena.py``), not fresh ones;
- ``lineage_stash +5 ms``: the same with every lineage-store ack 5 ms late (``store_delay_ms``):
  the lineage stash keeps the store off the critical path, so this costs nothing per call;
- ``write_first`` / ``+5 ms``: each call's event is acked by the lineage store before the call
  returns (the store answering at once, or 5 ms later): the baseline that pays the store's latency.

The peer is gloo (``torch.distributed``, backend ``gloo``): four processes on the same machine,
each calling ``dist.all_reduce`` on a tensor of the same size, timed the same way. Install it with
``pip install torch==2.13.0`` (the CPU build; without torch the peer is left out and said so).

Writes ``bench/results/collective-<time>.json`` and ``.png``, and prints a table with the targets.

Run: ``python bench/collective.py [--sizes 1,10,100] [--calls 10] [--checkpoint-every 5] [--quick]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import click
import numpy as np
from rich.progress import Progress
from run_meta import run_meta

import actorrt
from actorrt import collective

MB = 1 << 20
MEMBERS = 4
RESULTS = Path(__file__).parent / "results"
MODES = {"none": ("none", 0.0), "lineage_stash": ("lineage_stash", 0.0), "lineage_stash +5 ms": ("lineage_stash", 5.0),
         "write_first": ("write_first", 0.0), "write_first +5 ms": ("write_first", 5.0)}
# (mode, size MB) -> most this mode's time may be, as a multiple of gloo's
TARGETS_VS_GLOO = {("lineage_stash", 10): 1.0, ("lineage_stash", 100): 0.7}
TARGET_STORE_DELAY = 1.1  # lineage stash with a store 5 ms slower / without, at every size


@actorrt.remote
class Member:
    async def calls(self, nbytes: int, count: int) -> list[float]:
        x = np.ones(nbytes // 4, dtype=np.float32)
        times = []
        for _ in range(count):
            started = time.perf_counter()
            await collective.allreduce(x)
            times.append(time.perf_counter() - started)
        return times


def _actorrt(mode: str, sizes: list[int], calls: int, checkpoint_every: int,
             bar: Callable[[int], None]) -> dict[int, float]:
    ft, delay = MODES[mode]
    actorrt.init(num_nodes=2, ft=ft, store_delay_ms=delay)
    try:
        members = [Member.options(node=r % 2).remote() for r in range(MEMBERS)]
        collective.create_collective_group(members)
        out = {}
        for size in sizes:
            # Warm-up: one checkpoint interval, after which kept results come back to the pool
            # at each checkpoint (a job's steady state: no new segment per call).
            checkpoints = ft != "none" and checkpoint_every > 0
            actorrt.get([m.calls.remote(size * MB, max(2, checkpoint_every)) for m in members])
            if checkpoints:
                actorrt.checkpoint(members)
            per_call: list[float] = []
            while len(per_call) < calls:
                batch = min(checkpoint_every or calls, calls - len(per_call))
                times = actorrt.get([m.calls.remote(size * MB, batch) for m in members])
                per_call += [max(t) for t in zip(*times, strict=True)]  # the slowest member's
                if checkpoints:
                    actorrt.checkpoint(members)  # what a training job does: kept results go
            out[size] = float(np.median(per_call))
            bar(1)
        return out
    finally:
        actorrt.shutdown()


GLOO_WORKER = """
import sys, time, numpy as np, torch, torch.distributed as dist
rank, world, init, sizes, calls = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
out = {}
for mb in map(int, sizes.split(",")):
    t = torch.ones(mb * (1 << 20) // 4, dtype=torch.float32)
    times = []
    for i in range(calls + 2):
        dist.barrier()
        started = time.perf_counter()
        dist.all_reduce(t)
        times.append(time.perf_counter() - started)
    out[mb] = times[2:]
print(repr(out))
dist.destroy_process_group()
"""


def _gloo(sizes: list[int], calls: int, bar: Callable[[int], None]) -> dict[int, float] | None:
    try:
        import torch  # noqa: F401
    except ImportError:
        click.echo("gloo: torch is not installed (pip install torch==2.13.0); the peer is left out", err=True)
        return None
    with tempfile.TemporaryDirectory() as tmp:
        init = f"file://{tmp}/rendezvous"
        env = dict(os.environ, OMP_NUM_THREADS="1")
        procs = [subprocess.Popen([sys.executable, "-c", GLOO_WORKER, str(r), str(MEMBERS), init,
                                   ",".join(map(str, sizes)), str(calls)], stdout=subprocess.PIPE, env=env, text=True)
                 for r in range(MEMBERS)]
        outs = [p.communicate(timeout=600)[0] for p in procs]
    if any(p.returncode for p in procs):
        raise click.ClickException("a gloo process failed")
    per_rank = [eval(o.strip().splitlines()[-1]) for o in outs]  # noqa: S307 - our own subprocess's repr
    bar(len(sizes))
    return {size: float(np.median([max(t) for t in zip(*(r[size] for r in per_rank), strict=True)]))
            for size in sizes}


def _plot(results: dict[str, dict[int, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, by_size in results.items():
        sizes = sorted(by_size)
        ax.plot(sizes, [by_size[s] * 1e3 for s in sizes], marker="o", label=name,
                linestyle="--" if name == "gloo" else "-")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("array size (MB, float32)")
    ax.set_ylabel("allreduce time (ms, median)")
    ax.set_title(f"Allreduce, {MEMBERS} members on 2 nodes (one host)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


@click.command()
@click.option("--sizes", default="1,10,100", show_default=True, help="array sizes in MB, comma-separated")
@click.option("--calls", default=10, show_default=True, help="timed calls per size (after 2 warm-up calls)")
@click.option("--checkpoint-every", default=5, show_default=True,
              help="calls between the members' checkpoints (0: none but memory-pressure ones)")
@click.option("--modes", default=",".join(MODES), show_default=True, help="actorrt modes, comma-separated")
@click.option("--gloo/--no-gloo", "with_gloo", default=True, show_default=True)
@click.option("--quick", is_flag=True, help="1 and 10 MB, 5 calls")
def main(sizes: str, calls: int, checkpoint_every: int, modes: str, with_gloo: bool, quick: bool) -> None:
    """Time an allreduce per size, per mode, against gloo."""
    size_list = [1, 10] if quick else [int(s) for s in sizes.split(",")]
    calls = 5 if quick else calls
    mode_list = [m.strip() for m in modes.split(",") if m.strip()]
    results: dict[str, dict[int, float]] = {}
    with Progress(transient=True) as progress:
        task = progress.add_task("allreduce", total=len(size_list) * (len(mode_list) + with_gloo))

        def bar(done: int = 1) -> None:
            progress.advance(task, done)

        if with_gloo:
            gloo = _gloo(size_list, calls, bar)
            if gloo is not None:
                results["gloo"] = gloo
        for mode in mode_list:
            results[mode] = _actorrt(mode, size_list, calls, checkpoint_every, bar)

    every = f"checkpoints every {checkpoint_every} calls" if checkpoint_every else "memory-pressure checkpoints only"
    click.echo(f"allreduce, {MEMBERS} members on 2 nodes, float32, median of {calls} calls, {every}; "
               f"{os.cpu_count()} cores")
    click.echo(f"{'':<21}" + "".join(f"{f'{size} MB':>10}" for size in size_list)
               + ("".join(f"{f'{size} MB / gloo':>17}" for size in size_list) if "gloo" in results else ""))
    for name, by_size in results.items():
        row = f"{name:<21}" + "".join(f"{by_size[size] * 1e3:>8.2f}ms" for size in size_list)
        if "gloo" in results:
            row += "".join(f"{by_size[size] / results['gloo'][size]:>16.2f}x" for size in size_list)
        click.echo(row)
    ratios: dict[str, float] = {}
    for (mode, size), target in TARGETS_VS_GLOO.items():
        if "gloo" in results and mode in results and size in size_list:
            ratio = ratios[f"{mode}/gloo at {size} MB"] = results[mode][size] / results["gloo"][size]
            click.echo(f"{mode} / gloo at {size} MB: {ratio:.2f}x (target <= {target}x)")
    for fast, slow in (("lineage_stash", "lineage_stash +5 ms"), ("write_first", "write_first +5 ms")):
        if fast in results and slow in results:
            for size in size_list:
                ratio = ratios[f"{slow} / +0 at {size} MB"] = results[slow][size] / results[fast][size]
                target = f" (target <= {TARGET_STORE_DELAY}x)" if fast == "lineage_stash" else ""
                click.echo(f"{slow} / +0 at {size} MB: {ratio:.2f}x{target}")

    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp, meta = run_meta(members=MEMBERS, sizes_mb=size_list, calls=calls, checkpoint_every=checkpoint_every)
    doc = {"meta": meta, "seconds": {n: {str(s): t for s, t in r.items()} for n, r in results.items()},
           "ratios": ratios}
    (RESULTS / f"collective-{stamp}.json").write_text(json.dumps(doc, indent=1))
    _plot(results, RESULTS / f"collective-{stamp}.png")
    click.echo(f"wrote {RESULTS}/collective-{stamp}.json and .png")


if __name__ == "__main__":
    main()
