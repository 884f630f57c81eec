"""The streaming wordcount of bench/streaming.py on Bytewax (``bytewax==0.21.1``), for comparison.

Run by bench/streaming.py in the peers' environment (scripts/setup-peers.sh), as
``python -m bytewax.run bench/peers/bytewax_wordcount.py:flow`` with the parameters in the
environment: lines per second ``RATE``, for ``SECONDS``, scheduled from the wall-clock time ``T0``;
every output's latency (from its line's scheduled time to the sink) goes to ``OUT``/<pid>.lat as
lines of ``word count emit_time latency_s``. The source's state is how many lines it emitted, so a run resumed
from a snapshot (``-r``) goes on from there, with the lines' original schedule.
"""

from __future__ import annotations

import os
import time
from datetime import UTC
from pathlib import Path

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
from bytewax.outputs import DynamicSink, StatelessSinkPartition

RATE = float(os.environ["RATE"])
SECONDS = float(os.environ["SECONDS"])
T0 = float(os.environ["T0"])
OUT = Path(os.environ["OUT"])
WORDS = "the quick brown fox jumps over the lazy dog and the cat sat on a mat".split()


def line(i: int) -> str:
    return " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(1 + i % 8))


class Paced(StatefulSourcePartition):
    def __init__(self, emitted: int | None) -> None:
        self.i = emitted or 0
        self.total = int(RATE * SECONDS)

    def next_batch(self) -> list[tuple[float, str]]:
        if self.i >= self.total:
            raise StopIteration
        due = min(self.total, int((time.time() - T0) * RATE) + 1)
        out = [(T0 + i / RATE, line(i)) for i in range(self.i, due)]
        self.i = max(self.i, due)
        return out

    def next_awake(self):
        return None if self.i < int((time.time() - T0) * RATE) + 1 else _at(T0 + self.i / RATE)

    def snapshot(self) -> int:
        return self.i


def _at(t: float):
    from datetime import datetime

    return datetime.fromtimestamp(t, tz=UTC)


class Lines(FixedPartitionedSource):
    def list_parts(self) -> list[str]:
        return ["lines"]

    def build_part(self, step_id, for_part, resume_state):
        return Paced(resume_state)


class LatencyPart(StatelessSinkPartition):
    def __init__(self) -> None:
        OUT.mkdir(parents=True, exist_ok=True)
        self.file = open(OUT / f"{os.getpid()}.lat", "a")

    def write_batch(self, items) -> None:
        now = time.time()
        self.file.write("".join(f"{word} {n} {now:.6f} {now - t:.6f}\n" for word, (n, t) in items))
        self.file.flush()

    def close(self) -> None:
        self.file.close()


class Latencies(DynamicSink):
    def build(self, step_id, worker_index, worker_count):
        return LatencyPart()


def count(state, record):
    t, _ = record
    n = (state or 0) + 1
    return n, [(n, t)]


flow = Dataflow("wordcount")
lines = op.input("lines", flow, Lines())
words = op.flat_map("split", lines, lambda tl: [(w, (tl[0], w)) for w in tl[1].split()])
counts = op.stateful_flat_map("count", words, count)
op.output("out", counts, Latencies())
