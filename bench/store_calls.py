"""The lineage store's hot call, alone: CPU of the calling process per script call, by client.

Every flush of a process's stash is one ``WRITE_IF_NEWER`` script call on its shard. This times
that call, as ``LineageStore.write`` makes it, through the two clients the store has: the lean
pipelined connection a sharded store uses (``store/script_connection.py``) and redis-py's asyncio
client (what a Redis Cluster store uses, and what every store used before), against one real
redis-server, alternating, in one run. The figure is the calling process's CPU time (user +
system) per call, and the wall time per call, for batches of 1 and 20 specs.

Writes ``bench/results/store-calls-<time>.json`` and ``.png`` and prints a table.

Run: ``python bench/store_calls.py [--calls 2000] [--batches 1,20]``.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import click
import uvloop
from run_meta import run_meta

from actorrt.core.task_spec import SenderContext, build_task, encode_args
from actorrt.store.clients import ShardedStore, _Store
from actorrt.store.lineage_store import LineageStore
from actorrt.store.redis_server import RedisShard

RESULTS = Path(__file__).parent / "results"


class RedisPyStore(ShardedStore):
    """The same shards, its script calls through redis-py (``_Store.run_script``)."""

    async def run_script(self, source: str, keys: list[bytes], args: list) -> object:
        return await _Store.run_script(self, source, keys, args)


async def _time_writes(store: LineageStore, batches: list[list], rounds: int) -> dict[str, float]:
    await store.write(batches[0])  # connect, load the script
    cpu, wall = time.process_time(), time.perf_counter()
    for writes in batches[1:rounds + 1]:
        await store.write(writes)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"cpu_us_per_call": cpu / rounds * 1e6, "wall_us_per_call": wall / rounds * 1e6}


async def measure(calls: int, batch_sizes: list[int]) -> list[dict[str, Any]]:
    results = []
    with tempfile.TemporaryDirectory() as directory:
        shard = await RedisShard.start(Path(directory), "pw")
        try:
            context = SenderContext(b"s" * 16)
            encoded = encode_args([7], {}, 100_000)
            for batch in batch_sizes:
                for name, cls in (("lean", ShardedStore), ("redis-py", RedisPyStore), ("lean", ShardedStore),
                                  ("redis-py", RedisPyStore)):
                    store = LineageStore(cls([shard.address], "pw"), writer=1)
                    batches = [[(build_task(context, b"r" * 16, "hop", encoded.args, encoded.refs, "A"), True)
                                for _ in range(batch)] for _ in range(calls // 2 + 1)]
                    timed = await _time_writes(store, batches, calls // 2)
                    await store.aclose()
                    results.append({"client": name, "batch": batch, **timed})
        finally:
            await shard.stop()
    return _pooled(results)


def _pooled(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The two alternated halves of each (client, batch), averaged."""
    pooled: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for run in runs:
        pooled.setdefault((run["client"], run["batch"]), []).append(run)
    return [{"client": client, "batch": batch,
             **{k: sum(r[k] for r in rs) / len(rs) for k in ("cpu_us_per_call", "wall_us_per_call")}}
            for (client, batch), rs in pooled.items()]


def _plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    batches = sorted({r["batch"] for r in results})
    fig, ax = plt.subplots(figsize=(6, 3.5))
    width = 0.35
    for i, client in enumerate(("lean", "redis-py")):
        cpu = [next(r["cpu_us_per_call"] for r in results if r["client"] == client and r["batch"] == b)
               for b in batches]
        ax.bar([j + i * width for j in range(len(batches))], cpu, width, label=client)
    ax.set_xticks([j + width / 2 for j in range(len(batches))], [f"{b} spec(s) a call" for b in batches])
    ax.set_ylabel("caller CPU per script call (µs)")
    ax.set_title("lineage store write: caller CPU by client")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


@click.command()
@click.option("--calls", default=2000, show_default=True, help="Script calls per client and batch size.")
@click.option("--batches", default="1,20", show_default=True, help="Specs per call, comma-separated.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=RESULTS, show_default=True)
def main(calls: int, batches: str, out: Path) -> None:
    batch_sizes = [int(b) for b in batches.split(",")]
    results = uvloop.run(measure(calls, batch_sizes))
    print(f"{'client':10s} {'specs/call':>10s} {'CPU µs/call':>12s} {'wall µs/call':>13s}")
    for r in results:
        print(f"{r['client']:10s} {r['batch']:>10d} {r['cpu_us_per_call']:>12.0f} {r['wall_us_per_call']:>13.0f}")
    cpu = {(r["client"], r["batch"]): r["cpu_us_per_call"] for r in results}
    ratios = {f"cpu_lean_over_redis_py_batch_{b}": cpu["lean", b] / cpu["redis-py", b] for b in batch_sizes}
    for batch in batch_sizes:
        lean_over = cpu["lean", batch] / cpu["redis-py", batch]
        print(f"{batch} spec(s) a call: caller CPU, lean / redis-py: {lean_over:.2f}x")
    out.mkdir(parents=True, exist_ok=True)
    stamp, meta = run_meta(calls=calls, batches=batch_sizes)
    (out / f"store-calls-{stamp}.json").write_text(json.dumps({"meta": meta, "results": results, "ratios": ratios},
                                                             indent=1))
    _plot(results, out / f"store-calls-{stamp}.png")
    print(f"wrote {out}/store-calls-{stamp}.json and .png")


if __name__ == "__main__":
    main()
