"""Fault-tolerance policies per actor, in one cluster: a pipeline of lineage-stash splitters, a
lazily checkpointed counter that several senders feed, and an eagerly checkpointed sink, under
node kills (SIGKILL, real node processes, real Redis). The sink's totals are checked against a
plain-Python count of the same words: a duplicate counts twice, a loss is missing."""

from __future__ import annotations

import collections
import random
import time

import pytest

import actorrt
from actorrt.exceptions import ActorRTError
from actorrt.lineage import policies
from actorrt.streaming import Dataflow
from tests.support.store_reads import records_sent_to
from tests.support.waiting import eventually


@actorrt.remote
class Splitter:
    def __init__(self, counter):
        self.counter = counter

    def push(self, line):
        self.counter.add.remote(line.split())


@actorrt.remote
class Counter:
    """Counts words from several senders, in arrival order; sends each batch's counts on."""

    __actorrt_acks__ = ("add",)  # a lazy counter answers add() at once; its callers keep the calls

    def __init__(self, sink):
        self.sink = sink
        self.counts = collections.Counter()

    def add(self, words):
        self.counts.update(words)
        self.sink.put.remote(dict(collections.Counter(words)))

    def size(self):
        return sum(self.counts.values())


@actorrt.remote
class Sink:
    __actorrt_acks__ = ("put",)

    def __init__(self):
        self.totals = collections.Counter()

    def put(self, counts):
        self.totals.update(counts)

    def read(self):
        return dict(self.totals)


@actorrt.remote
class Echo:
    __actorrt_acks__ = ("call_out",)

    def __init__(self):
        self.calls = 0

    def echo(self, value):
        self.calls += 1
        return value

    def call_out(self, other):
        other.echo.remote(1)

    def count(self):
        return self.calls


def _lines(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(40)]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(1, 8))) for _ in range(n)]


LAZY = policies.checkpoint(every_s=0.5)


def _pipeline(counter_ft=LAZY, sink_ft="eager"):
    sink = Sink.options(node=2, ft=sink_ft).remote()
    counter = Counter.options(node=1, ft=counter_ft).remote(sink)
    splitters = [Splitter.options(node=n).remote(counter) for n in (0, 2)]
    return sink, counter, splitters


def _feed(splitters, lines, sink=None, kills=()) -> None:
    """Push every line, through the splitters in turn. ``kills``: (after how many lines, nodes to
    kill). Before the first kill, 50 lines earlier, wait until the sink has counts: the counter
    then has a checkpoint, and the kill finds it past it, holding, sending and keeping calls."""
    at = dict(kills)
    settle = min(at, default=-1) - 100
    for i, line in enumerate(lines):
        if i == settle:
            eventually(lambda: actorrt.get(sink.read.remote(), timeout=60), what="counts at the sink")
        for node in at.get(i, ()):
            actorrt.kill_node(node)
        splitters[i % len(splitters)].push.remote(line)


def _rebuilt(node: int) -> dict:
    """The one recovery of ``node``, once it rebuilt its actors."""
    def recoveries():
        return next(n for n in actorrt.stats()["nodes"] if n["node"] == node)["recoveries"]
    return eventually(recoveries, lambda r: r and r[0]["actors"] > 0, what=f"node {node}'s recovery")[0]


def _exact(sink, lines) -> None:
    expected = collections.Counter(w for line in lines for w in line.split())
    total = sum(expected.values())
    eventually(lambda: actorrt.get(sink.read.remote(), timeout=60), lambda got: sum(got.values()) >= total,
               timeout=90, what="every word at the sink")
    got = actorrt.get(sink.read.remote(), timeout=60)
    assert got == dict(expected)


@pytest.mark.parametrize("kills", [
    [(250, [1])],  # the counter's node
    [(150, [2])],  # the sink's node (with a splitter)
    [(250, [1, 2])],  # both at once
    [(150, [1]), (151, [2])],  # the sink's node while the counter's recovers
], ids=["counter", "sink", "both", "during-recovery"])
def test_mixed_policies_are_exact_under_node_kills(cluster_with, tmp_path, kills):
    with cluster_with(num_nodes=3, store_shards=2, checkpoint_dir=tmp_path):
        sink, counter, splitters = _pipeline()
        lines = _lines(400, seed=len(kills) * 7 + kills[0][1][-1])
        _feed(splitters, lines, sink, kills)
        _exact(sink, lines)
        killed = {node for _, nodes in kills for node in nodes}
        if 1 in killed:  # the counter went back to its checkpoint; the senders sent again what came after
            assert _rebuilt(1)["from_checkpoint"] >= 1
            # Restored, it still answers its acknowledgements at once, writing nothing.
            written = records_sent_to(counter.actor_id)
            assert actorrt.get([counter.add.remote(["extra"]) for _ in range(20)]) == [None] * 20
            assert records_sent_to(counter.actor_id) == written
        if 2 in killed:
            assert _rebuilt(2)["from_checkpoint"] == 1


def test_a_checkpointing_actor_logs_nothing_as_it_runs(cluster_with, tmp_path):
    with cluster_with(num_nodes=3, store_shards=2, checkpoint_dir=tmp_path):
        sink, counter, splitters = _pipeline(counter_ft=policies.checkpoint(every_tasks=10_000), sink_ft="checkpoint")
        lines = _lines(200, seed=3)
        _feed(splitters, lines)
        actorrt.get([s.push.remote("") for s in splitters])  # every line went on to the counter
        assert eventually(lambda: records_sent_to(counter.actor_id)) == 1  # its constructor's: nothing since
        words = sum(len(line.split()) for line in lines)
        # A result with a value leaves once the counter's lineage is written (an escape).
        eventually(lambda: actorrt.get(counter.size.remote()), lambda n: n == words, what="every word counted")
        assert records_sent_to(counter.actor_id) > 1
        actorrt.checkpoint([counter])  # what it holds for the sink leaves with a checkpoint too
        _exact(sink, lines)


def test_lazy_acknowledgements_leave_at_once_and_values_escape(cluster_with, tmp_path):
    with cluster_with(num_nodes=2, store_shards=1, checkpoint_dir=tmp_path):
        lazy = Echo.options(node=1, ft=policies.checkpoint(every_tasks=1000)).remote()
        other = Echo.options(node=0).remote()
        before = eventually(lambda: records_sent_to(lazy.actor_id), what="its constructor's record")
        assert actorrt.get([lazy.call_out.remote(other) for _ in range(20)], timeout=30) == [None] * 20
        # Acknowledged at once; the calls they made wait for a checkpoint, a second at most
        # whatever the cadence (1,000 tasks here), and nothing was written.
        eventually(lambda: actorrt.get(other.count.remote()), lambda n: n == 20, what="the held calls")
        assert records_sent_to(lazy.actor_id) == before
        assert actorrt.get(lazy.echo.remote(5)) == 5  # a value: the lineage is written first
        assert records_sent_to(lazy.actor_id) > before


def test_an_ephemeral_actor_restarts_empty_and_its_callers_send_again(cluster_with, tmp_path):
    with cluster_with(num_nodes=2, store_shards=1, checkpoint_dir=tmp_path):
        echo = Echo.options(node=1, ft="ephemeral").remote()
        assert actorrt.get([echo.echo.remote(i) for i in range(50)]) == list(range(50))
        assert eventually(lambda: records_sent_to(echo.actor_id)) == 1  # its constructor's only
        actorrt.kill_node(1)
        assert actorrt.get([echo.echo.remote(i) for i in range(50, 60)]) == list(range(50, 60))
        with pytest.raises(ActorRTError, match="an ephemeral actor .* calls no actor"):
            actorrt.get(echo.call_out.remote(Echo.options(node=0).remote()))


def test_policies_are_checked_where_they_are_given(cluster_with, tmp_path):
    with pytest.raises(ValueError, match="ft= must be one of"):
        Echo.options(ft="lazy")
    with pytest.raises(ValueError, match="every_s must be"):
        policies.checkpoint(every_s=0)
    with pytest.raises(ValueError, match="give no checkpoint_every"):
        Echo.options(ft="checkpoint", checkpoint_every=10)
    with cluster_with(num_nodes=1, ft="checkpoint", checkpoint_dir=tmp_path):
        with pytest.raises(ActorRTError, match="needs a cluster that stashes lineage"):
            Echo.options(ft="eager").remote()


def _killing(records, at: int, node: int):
    for i, record in enumerate(records):
        if i == at:
            actorrt.kill_node(node)
        if i % 50 == 0:
            time.sleep(0.005)
        yield record


def test_a_dataflow_of_mixed_policies_counts_exactly_through_a_kill(cluster_with, tmp_path):
    """Lazily checkpointed splitters and counts, an eager last stage: the counts equal a plain
    count, with the node of a count instance killed mid-stream (the eager actors' own kills are
    the pipeline tests' above)."""
    node = 1
    lines = _lines(3000, seed=node)
    oracle = collections.Counter(w for line in lines for w in line.split())
    with cluster_with(num_nodes=3, store_shards=2, checkpoint_dir=tmp_path):
        flow = Dataflow("mixed", batch_size=20, max_in_flight=4, ft=policies.checkpoint(every_s=0.2))
        (flow.source(_killing(lines, 1500, node))
         .flat_map(str.split, parallelism=2)
         .key_by(lambda word: word)
         .fold(lambda: 0, lambda n, word: n + 1, parallelism=2)
         .map(lambda update: update, parallelism=1, ft="eager")
         .collect())
        result = flow.run(timeout=120)
        final = {}
        for word, n in result.outputs:
            final[word] = max(final.get(word, 0), n)
        assert final == oracle
        assert _rebuilt(node)["from_checkpoint"] >= 1  # went back to a checkpoint, and on from there
