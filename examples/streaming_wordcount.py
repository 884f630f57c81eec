"""A streaming wordcount with windows, and a node SIGKILLed in the middle of the stream.

Lines are split by two mappers, counted per word by two keyed reducers (a running count), and
counted per word and 0.2 s tumbling window by two window operators; node 1 is killed while the
lines flow. Its operators are rebuilt by replay while the others go on, and the counts still equal
a plain-Python count of the same text.

    python examples/streaming_wordcount.py [--lines 4000] [--kill]
"""

from __future__ import annotations

import collections
import time

import click

import actorrt
from actorrt.streaming import Dataflow, Tumbling


def text(lines: int) -> list[str]:
    words = "the quick brown fox jumps over the lazy dog and the cat".split()
    return [" ".join(words[(i * 7 + j) % len(words)] for j in range(1 + i % 5)) for i in range(lines)]


def arriving(lines: list[str], kill_at: int | None):
    """The lines at about 20,000 a second, with node 1 killed at line ``kill_at``."""
    for i, line in enumerate(lines):
        if i == kill_at:
            print(f"killing node 1 at line {i}")
            actorrt.kill_node(1)
        if i % 100 == 0:
            time.sleep(0.005)
        yield line


@click.command()
@click.option("--lines", default=4000, show_default=True)
@click.option("--kill", is_flag=True, help="SIGKILL node 1 halfway through")
def main(lines: int, kill: bool) -> None:
    actorrt.init(num_nodes=2)
    corpus = text(lines)
    oracle = collections.Counter(word for line in corpus for word in line.split())

    flow = Dataflow("wordcount", batch_size=20)
    words = flow.source(arriving(corpus, lines // 2 if kill else None)).flat_map(str.split, parallelism=2)
    (words.key_by(lambda word: word)
     .window(Tumbling(0.2), lambda: 0, lambda n, word: n + 1, parallelism=2, name="count per window")
     .collect())
    started = time.perf_counter()
    result = flow.run(timeout=300)
    elapsed = time.perf_counter() - started

    per_window = collections.Counter()
    for word, _start, _end, n in result.outputs:
        per_window[word] += n
    print(f"{lines} lines in {elapsed:.2f} s; {len(result.outputs)} (word, window) counts")
    for op in result.operators:
        print(f"  stage {op['stage']} {op['name']:<28} #{op['instance']}: {op['in']} in, {op['out']} out")
    if kill:
        recoveries = [r for n in actorrt.stats()["nodes"] for r in n["recoveries"]]
        print(f"node 1 recovered: {recoveries[-1]['tasks_replayed']} tasks replayed")
    print(f"window counts add up to a plain-Python count: {per_window == oracle}")
    actorrt.shutdown()


if __name__ == "__main__":
    main()
