"""Chaos soak: a streaming pipeline under random faults, checked against an oracle.

Deterministic mappers (nodes 0 and 1) feed nondeterministic reducers (nodes 1 and 2, a checkpoint
every 25 tasks); every 10th batch a reducer tells a nondeterministic sink actor (node 3) with a
fire-and-forget ``emit``, and the sink writes each emit exactly once with a ``FileSink``. While the
driver feeds, a thread injects a fault every 0.4-1.5 s (``Chaos``): a node SIGKILLed (two at once a
quarter of the time), a node hung with SIGSTOP and resumed (past the heartbeat timeout, it is
replaced and must not act when it resumes), or a store shard SIGKILLed. Once per round the driver
makes a call too large for a task spec, which must fail at ``.remote()`` alone.

The oracle is plain Python over the same lines: the words each reducer must count, and the emits
it must send. Each round prints what was lost (expected, never arrived), duplicated (a record the
sink's files hold twice) and stuck (counts still short when the wait ends).

    python scripts/chaos_soak.py --rounds 30 --seconds 8       # ~10 faults per round
    python scripts/chaos_soak.py --minutes 30                  # rounds until 30 minutes are up

Every `--fresh-every` rounds (10) it starts a fresh cluster: earlier rounds' actors stay on a
cluster, and a sink that never checkpoints replays them all whenever its node is killed.
"""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import sys
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import click

import actorrt
from actorrt.lineage.options import DEFAULT_INLINE_MAX_BYTES, MAX_SPEC_BYTES
from actorrt.sinks import FileSink, read_parts

NUM_NODES = 4
MAPPER_NODES = (0, 1, 0)
REDUCER_NODES = (1, 2, 1)
SINK_NODE = 3
HEARTBEAT_TIMEOUT_S = 2.0  # a hang longer than this gets a node declared dead
EMIT_EVERY = 10  # batches per emit
BATCH_LINES = 20


@actorrt.remote
class Sink:
    def __init__(self, directory: str):
        self.file = FileSink(directory)
        self.emits = 0

    async def emit(self, reducer: int, batches: int, words: int) -> None:
        await self.file.write(json.dumps([reducer, batches, words]).encode())
        self.emits += 1

    def count(self) -> int:
        return self.emits


@actorrt.remote
class Reducer:
    def __init__(self, index: int, sink):
        self.index, self.sink = index, sink
        self.counts: collections.Counter = collections.Counter()
        self.batches = 0

    def add(self, part: dict) -> None:
        self.counts.update(part)
        self.batches += 1
        if self.batches % EMIT_EVERY == 0:
            self.sink.emit.remote(self.index, self.batches, self.counts.total())

    def state(self) -> tuple[int, dict]:
        return self.batches, dict(self.counts)


@actorrt.remote
class Mapper:
    def __init__(self, reducers: list):
        self.reducers = reducers

    def map(self, lines: list[str]) -> None:
        parts = [collections.Counter() for _ in self.reducers]
        for line in lines:
            for word in line.split():
                parts[partition(word, len(parts))][word] += 1
        for reducer, part in zip(self.reducers, parts, strict=True):
            if part:
                reducer.add.remote(dict(part))


def partition(word: str, n: int) -> int:
    return zlib.crc32(word.encode()) % n


def corpus(seed: int, lines: int) -> list[str]:
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(400)]
    return [" ".join(rng.choices(vocabulary, k=rng.randint(1, 12))) for _ in range(lines)]


@dataclass
class Expected:
    """What the pipeline must produce from ``batches``, computed in plain Python."""

    counts: list[collections.Counter]  # per reducer
    adds: list[int]  # per reducer: batches that had words for it
    emits: set[tuple[int, int]] = field(default_factory=set)  # (reducer, batches so far)

    @classmethod
    def of(cls, batches: list[list[str]], reducers: int) -> Expected:
        counts = [collections.Counter() for _ in range(reducers)]
        adds = [0] * reducers
        for batch in batches:
            parts = [collections.Counter() for _ in range(reducers)]
            for line in batch:
                for word in line.split():
                    parts[partition(word, reducers)][word] += 1
            for r, part in enumerate(parts):
                if part:
                    counts[r].update(part)
                    adds[r] += 1
        emits = {(r, n) for r in range(reducers) for n in range(EMIT_EVERY, adds[r] + 1, EMIT_EVERY)}
        return cls(counts, adds, emits)


@dataclass
class Outcome:
    lost: int  # emits expected that never reached the sink's files, plus words missing
    duplicated: int  # sink records written more than once, plus words counted too often
    stuck: bool  # still short when the wait ended
    faults: dict[str, int]  # injected, by kind
    seconds: float
    detail: str = ""


class Chaos:
    """Injects a random fault every ``pause`` seconds until stopped:

    - ``kill``: SIGKILL a node, two at once a quarter of the time;
    - ``hang``: SIGSTOP a node, SIGCONT it 0.3 s to twice the heartbeat timeout later (a long hang
      gets it declared dead and replaced; it must not act when it resumes);
    - ``shard``: SIGKILL a lineage-store shard (the head restarts it from its append-only file).
    """

    KINDS = {"kill": 0.5, "hang": 0.25, "shard": 0.25}

    def __init__(self, rng: random.Random, slots: range, pause: tuple[float, float] = (0.4, 1.5),
                 kinds: dict[str, float] | None = None):
        self.rng, self.slots, self.pause = rng, slots, pause
        self.kinds = kinds or self.KINDS
        self.faults: collections.Counter = collections.Counter()
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._hung: list[threading.Timer] = []

    def __enter__(self) -> Chaos:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        for timer in self._hung:  # every hung node resumes
            timer.join()

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.rng.uniform(*self.pause)):
                kind = self.rng.choices(list(self.kinds), weights=list(self.kinds.values()))[0]
                getattr(self, f"_{kind}")()
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            self.errors.append(exc)

    def _alive(self) -> dict[int, dict]:
        return {n["node"]: n for n in actorrt.nodes() if n["state"] == "ALIVE" and n["pid"]}

    def _signal(self, pid: int, sig: int) -> bool:
        try:
            os.kill(pid, sig)
            return True
        except ProcessLookupError:  # it died meanwhile
            return False

    def _kill(self) -> None:
        alive = self._alive()
        for slot in self.rng.sample(list(self.slots), 2 if self.rng.random() < 0.25 else 1):
            if slot in alive and self._signal(alive[slot]["pid"], signal.SIGKILL):
                self.faults["kill"] += 1

    def _hang(self) -> None:
        alive = self._alive()
        slot = self.rng.choice(list(self.slots))
        if slot not in alive or not self._signal(alive[slot]["pid"], signal.SIGSTOP):
            return
        seconds = self.rng.uniform(0.3, 2 * HEARTBEAT_TIMEOUT_S)
        self.faults["long hang" if seconds > HEARTBEAT_TIMEOUT_S else "short hang"] += 1
        timer = threading.Timer(seconds, self._signal, (alive[slot]["pid"], signal.SIGCONT))
        timer.start()
        self._hung.append(timer)

    def _shard(self) -> None:
        shards = [s for s in actorrt.stats()["store_shards"] if s["pid"]]
        if shards and self._signal(self.rng.choice(shards)["pid"], signal.SIGKILL):
            self.faults["shard"] += 1


def oversized_call_is_refused(mapper) -> bool:
    """A call whose spec would be over the size limit fails at ``.remote()`` and sends nothing."""
    try:
        mapper.map.remote(*[b"x" * (DEFAULT_INLINE_MAX_BYTES - 100)] * (MAX_SPEC_BYTES // DEFAULT_INLINE_MAX_BYTES + 2))
    except ValueError:
        return True
    return False


def run_round(seed: int, seconds: float, wait_s: float, directory: Path) -> Outcome:
    """One pipeline on the running cluster, fed for about ``seconds`` under chaos."""
    rng = random.Random(seed)
    started = time.monotonic()
    sink = Sink.options(node=SINK_NODE).remote(str(directory))
    reducers = [Reducer.options(node=n, nondeterministic=True, checkpoint_every=25).remote(i, sink)
                for i, n in enumerate(REDUCER_NODES)]
    mappers = [Mapper.options(node=n, nondeterministic=False).remote(reducers) for n in MAPPER_NODES]
    pause = 0.01
    lines = corpus(seed, int(seconds / pause) * BATCH_LINES)
    batches = [lines[i:i + BATCH_LINES] for i in range(0, len(lines), BATCH_LINES)]
    expected = Expected.of(batches, len(reducers))
    with Chaos(rng, range(NUM_NODES)) as chaos:
        for i, batch in enumerate(batches):
            mappers[i % len(mappers)].map.remote(batch)
            if i == len(batches) // 2:
                chaos.faults["oversized call"] += 1
                if not oversized_call_is_refused(mappers[0]):
                    chaos.errors.append(AssertionError("an oversized call was not refused at .remote()"))
            time.sleep(pause)
    if chaos.errors:
        raise chaos.errors[0]

    deadline = time.monotonic() + wait_s
    while True:
        states = actorrt.get([r.state.remote() for r in reducers], timeout=wait_s)
        emitted = actorrt.get(sink.count.remote(), timeout=wait_s)
        done = [b for b, _ in states] == expected.adds and emitted >= len(expected.emits)
        if done or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    time.sleep(0.5)  # a late duplicate would show now
    states = actorrt.get([r.state.remote() for r in reducers], timeout=wait_s)
    records = collections.Counter(tuple(json.loads(p)[:2]) for p in read_parts(directory))
    written = set(records)
    lost_emits = expected.emits - written
    words_short = sum(((expected.counts[r] - collections.Counter(c)).total() for r, (_, c) in enumerate(states)))
    words_over = sum(((collections.Counter(c) - expected.counts[r]).total() for r, (_, c) in enumerate(states)))
    duplicated = sum(n - 1 for n in records.values() if n > 1) + len(written - expected.emits) + words_over
    lost = len(lost_emits) + words_short
    detail = ""
    if lost or duplicated:
        detail = (f"lost emits {sorted(lost_emits)[:8]}, words short {words_short}, over {words_over}; "
                  f"reducer batches {[b for b, _ in states]} (expected {expected.adds})")
    return Outcome(lost, duplicated, not done, dict(chaos.faults), time.monotonic() - started, detail)


@click.command()
@click.option("--rounds", default=30, show_default=True, help="pipelines to run (ignored with --minutes)")
@click.option("--minutes", default=0.0, help="run rounds until this many minutes are up")
@click.option("--seconds", default=8.0, show_default=True, help="feeding time per round")
@click.option("--wait", "wait_s", default=120.0, show_default=True, help="how long a round may take to catch up")
@click.option("--seed", default=1, show_default=True, help="seed of the first round (then +1 per round)")
@click.option("--fresh-every", default=10, show_default=True, type=click.IntRange(min=1),
              help="start a fresh cluster every this many rounds (earlier rounds' actors stay, and slow replays)")
@click.option("--out", "out_dir", default="bench/results", show_default=True, type=click.Path(file_okay=False))
def main(rounds: int, minutes: float, seconds: float, wait_s: float, seed: int, fresh_every: int,
         out_dir: str) -> None:
    """Run the chaos pipeline round after round; print lost / duplicated / stuck per round and in all."""
    end = time.monotonic() + minutes * 60 if minutes else None
    outcomes: list[Outcome] = []
    try:
        with tempfile.TemporaryDirectory(prefix="actorrt-chaos-", ignore_cleanup_errors=True) as tmp:
            i = 0
            while (end is None and i < rounds) or (end is not None and time.monotonic() < end):
                if i % fresh_every == 0:
                    actorrt.shutdown()
                    actorrt.init(num_nodes=NUM_NODES, store_shards=2, ft="lineage_stash",
                                 heartbeat_timeout=HEARTBEAT_TIMEOUT_S)
                directory = Path(tmp) / f"round-{i}"
                directory.mkdir()
                o = run_round(seed + i, seconds, wait_s, directory)
                outcomes.append(o)
                faults = ", ".join(f"{n} {kind}" for kind, n in sorted(o.faults.items()))
                click.echo(f"round {i + 1} (seed {seed + i}): {faults}; lost {o.lost}, duplicated "
                           f"{o.duplicated}, stuck {o.stuck}, {o.seconds:.1f} s {o.detail}")
                i += 1
    finally:
        actorrt.shutdown()
    faults = sum((collections.Counter(o.faults) for o in outcomes), collections.Counter())
    totals = {"rounds": len(outcomes), "faults": dict(faults),
              "lost": sum(o.lost for o in outcomes), "duplicated": sum(o.duplicated for o in outcomes),
              "stuck": sum(o.stuck for o in outcomes), "bad_rounds": sum(bool(o.lost or o.duplicated or o.stuck)
                                                                          for o in outcomes)}
    click.echo(f"{totals['rounds']} rounds, faults {dict(sorted(faults.items()))}: lost {totals['lost']}, duplicated "
               f"{totals['duplicated']}, stuck {totals['stuck']} ({totals['bad_rounds']} rounds not exact)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (out / f"chaos-soak-{stamp}.json").write_text(json.dumps(
        {"totals": totals, "rounds": [o.__dict__ for o in outcomes]}, indent=1))
    sys.exit(1 if totals["bad_rounds"] else 0)


if __name__ == "__main__":
    main()
