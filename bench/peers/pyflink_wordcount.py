"""The streaming wordcount of bench/streaming.py on PyFlink (``apache-flink==2.3.0``), for comparison.

Run by bench/streaming.py in the peers' environment (scripts/setup-peers.sh) with the parameters in
the environment, as for bytewax_wordcount.py: lines per second ``RATE`` for ``SECONDS`` from the
wall-clock time ``T0``, parallelism ``PARALLELISM``; every count update's latency (from its line's
scheduled time to the last operator) goes to ``OUT``/<pid>.lat. A local Flink mini-cluster runs
the job, its Python functions in thread mode (the faster of PyFlink's two).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from pyflink.common import Configuration, Types
from pyflink.common.watermark_strategy import WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.number_seq import NumberSequenceSource

RATE = float(os.environ["RATE"])
SECONDS = float(os.environ["SECONDS"])
T0 = float(os.environ["T0"])  # (0: when the first line is asked for: a Flink job takes ~10 s to start)
OUT = Path(os.environ["OUT"])
PARALLELISM = int(os.environ.get("PARALLELISM", "2"))
WORDS = "the quick brown fox jumps over the lazy dog and the cat sat on a mat".split()


_start: list[float] = []


def paced(i: int) -> tuple[float, str]:
    """Line ``i``, released at its scheduled time (the source emits as fast as it can)."""
    if not _start:
        _start.append(T0 or time.time() + 0.5)
    due = _start[0] + i / RATE
    wait = due - time.time()
    if wait > 0:
        time.sleep(wait)
    return due, " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(1 + i % 8))


_files: dict[int, object] = {}


def record(update: tuple[str, int, float]) -> bool:
    f = _files.get(os.getpid())
    if f is None:
        OUT.mkdir(parents=True, exist_ok=True)
        f = _files[os.getpid()] = open(OUT / f"{os.getpid()}.lat", "a", buffering=1)
    now = time.time()
    f.write(f"{update[0]} {update[1]} {now:.6f} {now - update[2]:.6f}\n")
    return False


def main() -> None:
    config = Configuration()
    config.set_string("python.execution-mode", "process")  # "thread" cannot import from a virtualenv here
    # Small bundles: the default (1 s or 100,000 records) is tuned for throughput, not latency.
    config.set_string("python.fn-execution.bundle.time", "5")
    config.set_string("python.fn-execution.bundle.size", "100")
    config.set_string("python.executable", sys.executable)  # its libpython, not the first python on PATH
    config.set_string("python.client.executable", sys.executable)
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(PARALLELISM)
    total = int(RATE * SECONDS)
    numbers = env.from_source(NumberSequenceSource(0, total - 1), WatermarkStrategy.no_watermarks(), "lines")
    lines = numbers.set_parallelism(1).map(paced, output_type=Types.TUPLE([Types.DOUBLE(), Types.STRING()])) \
        .set_parallelism(1)
    words = lines.flat_map(lambda tl: [(w, 1, tl[0]) for w in tl[1].split()],
                           output_type=Types.TUPLE([Types.STRING(), Types.INT(), Types.DOUBLE()]))
    counts = words.key_by(lambda w: w[0]).reduce(lambda a, b: (a[0], a[1] + b[1], b[2]))
    counts.filter(record).print()
    env.execute("wordcount")
    for f in _files.values():
        f.close()


if __name__ == "__main__":
    main()
