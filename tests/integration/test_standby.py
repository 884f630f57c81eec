"""Standby actors (``options(standby=1)``) against SIGKILLed nodes: the standby's node takes the
actor's place from the checkpoint it holds loaded, without waiting for the dead node's restart, and
replays only the tail; a standby that dies is replaced; two failures in a row move the actor twice.
Oracle: the running sums of the numbers sent, computed here."""

from __future__ import annotations

import time
from collections import Counter
from itertools import accumulate

import numpy as np

import actorrt
from actorrt.streaming import Dataflow
from tests.support.waiting import eventually


@actorrt.remote
class Sum:
    """Adds what it is sent; ``pad`` bytes of state ride along (a checkpoint that takes a while to load)."""

    def __init__(self, pad: int = 0):
        self.total = 0
        self.pad = np.ones(pad, dtype=np.uint8)

    def add(self, k):
        self.total += k
        return self.total


@actorrt.remote
class Collector:
    def __init__(self):
        self.got = []

    def add(self, value):
        self.got.append(value)

    def values(self):
        return self.got


@actorrt.remote
class Ticker:
    """Calls itself ``n`` times; each call reads the clock (recorded) and sends what it read on. A
    checkpoint between two ticks holds the next one, sent and not yet run: the restore sends it
    again, and it must not run before the replay of the recorded one."""

    def __init__(self, collector, n):
        self.collector, self.n, self.sent = collector, n, []

    def start(self, me):
        self.me = me
        me.tick.remote()

    def tick(self):
        self.sent.append(actorrt.record(time.time_ns))
        self.collector.add.remote(self.sent[-1])
        if len(self.sent) < self.n:
            self.me.tick.remote()

    def values(self):
        return self.sent


def _where(actor_id: str) -> tuple[int, int | None]:
    """(the slot hosting the actor, the slot of its standby)."""
    for node in actorrt.stats()["nodes"]:
        for actor in node["actors"]:
            if actor["actor_id"] == actor_id:
                return node["node"], actor["standby"]
    raise AssertionError(f"actor {actor_id} is on no live node")


def _copy_loaded(actor_id: str, at_least: int) -> int:
    """The slot holding the actor's standby copy, once it has loaded checkpoint ``at_least`` or later."""
    def loaded():
        return [n["node"] for n in actorrt.stats()["nodes"] if n.get("standby_copies", {}).get(actor_id, 0) >= at_least]
    return eventually(loaded, bool, 30, f"a standby copy of checkpoint {at_least}")[0]


def _promotions(slot: int) -> list[dict]:
    node = next(n for n in actorrt.stats()["nodes"] if n["node"] == slot)
    return [r for r in node["recoveries"] if r["promoted"]]


def _sums(actor, numbers) -> list[int]:
    return [actorrt.get(actor.add.remote(k), timeout=60) for k in numbers]


def test_a_standby_takes_its_actors_place_without_the_nodes_restart():
    actorrt.init(num_nodes=3)
    try:
        guarded = Sum.options(node=0, standby=1, checkpoint_every=5).remote()
        plain = Sum.options(node=0, checkpoint_every=5).remote()  # no standby: rebuilt by the restart
        got = _sums(guarded, range(1, 23))
        _sums(plain, range(1, 4))
        actor_id = guarded.actor_id.hex()
        home, standby = _where(actor_id)
        assert home == 0 and standby in (1, 2)
        assert _copy_loaded(actor_id, 4) == standby  # 23 tasks with the constructor: checkpoint 4 after the 20th

        actorrt.kill_node(0)
        got += _sums(guarded, range(23, 41))
        assert got == list(accumulate(range(1, 41)))  # exactly once: no sum skipped or counted twice
        assert actorrt.stats()["moved_actors"] == {actor_id: standby}
        (promotion,) = _promotions(standby)
        assert promotion["actors"] == 1 and promotion["from_standby"] == 1 and promotion["slots"] == [0]
        assert promotion["tasks_replayed"] <= 5  # the tail after checkpoint 4, not the actor's whole past
        assert _where(actor_id)[0] == standby
        assert _sums(plain, [4]) == [10]  # the restart rebuilt the other actor, and only it
        eventually(lambda: [r["actors"] for n in actorrt.stats()["nodes"] if n["node"] == 0 for r in n["recoveries"]],
                   lambda rebuilt: rebuilt == [1], 30, "node 0's restart")
    finally:
        actorrt.shutdown()


def test_a_standby_that_dies_is_replaced_and_two_failures_in_a_row_move_the_actor_twice():
    actorrt.init(num_nodes=3)
    try:
        actor = Sum.options(node=0, standby=1, checkpoint_every=3).remote()
        actor_id = actor.actor_id.hex()
        got = _sums(actor, range(1, 11))
        _, first_standby = _where(actor_id)

        actorrt.kill_node(first_standby)  # the standby dies: the actor keeps another one
        got += _sums(actor, range(11, 21))
        second = eventually(lambda: _where(actor_id)[1], lambda s: s not in (None, 0, first_standby), 30,
                            "a new standby")
        _copy_loaded(actor_id, 6)

        actorrt.kill_node(0)  # the actor's node: it moves to its new standby
        got += _sums(actor, range(21, 31))
        assert _where(actor_id)[0] == second and len(_promotions(second)) == 1

        third = eventually(lambda: _where(actor_id)[1], lambda s: s is not None and s != second, 30,
                           "a standby behind the promoted actor")
        _copy_loaded(actor_id, 9)
        actorrt.kill_node(second)  # and again: two failures in a row
        got += _sums(actor, range(31, 41))
        assert _where(actor_id)[0] == third
        assert got == list(accumulate(range(1, 41)))
    finally:
        actorrt.shutdown()


def test_a_standby_replays_a_chain_of_calls_to_itself_and_what_it_sent_is_what_was_received():
    actorrt.init(num_nodes=2)
    try:
        collector = Collector.options(node=0).remote()
        ticker = Ticker.options(node=1, standby=1, checkpoint_every=7).remote(collector, 3000)
        ticker.start.remote(ticker)
        eventually(lambda: len(actorrt.get(collector.values.remote(), timeout=30)), lambda n: n >= 1000, 60,
                   "a thousand ticks")
        actorrt.kill_node(1)
        received = eventually(lambda: actorrt.get(collector.values.remote(), timeout=30), lambda got: len(got) >= 3000,
                              60, "every tick")
        assert actorrt.get(ticker.values.remote(), timeout=30) == received  # nothing re-read, lost or doubled
        assert len(_promotions(0)) == 1
    finally:
        actorrt.shutdown()


def test_the_actor_dies_while_its_standby_loads_a_checkpoint():
    """A state of 64 MB and a checkpoint after every call: the kill lands while the standby reads
    or restores one, and the promotion waits for that load or reads the file itself."""
    actorrt.init(num_nodes=2)
    try:
        actor = Sum.options(node=0, standby=1, checkpoint_every=1).remote(64 << 20)
        got = _sums(actor, range(1, 6))
        actorrt.kill_node(0)
        got += _sums(actor, range(6, 11))
        assert got == list(accumulate(range(1, 11)))
        assert _where(actor.actor_id.hex())[0] == 1 and len(_promotions(1)) == 1
    finally:
        actorrt.shutdown()


def test_a_streaming_wordcount_with_standbys_stays_exact_through_a_node_kill():
    """``fold(..., standby=1)``: the count's operators keep standbys, the splitters none; the
    killed node's count moves to its standby, its splitter is rebuilt by the node's restart."""
    text = [f"w{i % 7} w{i % 3} x{i % 11}" for i in range(3000)]
    oracle = Counter(w for line in text for w in line.split())
    moving = set()  # the counts on the killed node

    def killing(records, at):
        for i, record in enumerate(records):
            if i == at:  # a node with a count on it
                counts = [a for a in _operators() if "fold" in a["label"]]
                moving.update(a["actor_id"] for a in counts if a["node"] == counts[0]["node"])
                actorrt.kill_node(counts[0]["node"])
            if i % 50 == 0:
                time.sleep(0.005)
            yield record

    actorrt.init(num_nodes=3)
    try:
        flow = Dataflow("wordcount", batch_size=20, max_in_flight=4, checkpoint_every=10)
        (flow.source(killing(text, 1500))
         .flat_map(str.split, parallelism=2)
         .key_by(lambda word: word)
         .fold(lambda: 0, lambda n, word: n + 1, parallelism=2, standby=1)
         .collect())
        result = flow.run(timeout=120)
        final = {}
        for key, value in result.outputs:
            assert 1 <= value <= oracle[key]  # an instance's updates only grow by what it counted
            final[key] = value
        assert final == oracle  # every word counted once through the kill
        counts = [a for a in _operators() if "fold" in a["label"]]
        assert all(a["standby"] is not None for a in counts) and len(counts) == 2
        assert all(a["standby"] is None for a in _operators() if "fold" not in a["label"])
        moved = actorrt.stats()["moved_actors"]
        assert set(moved) == moving  # the killed node's splitter, if it had one, waited for the restart
        promoted = [r for n in actorrt.stats()["nodes"] for r in n["recoveries"] if r["promoted"]]
        assert sum(r["actors"] for r in promoted) == len(moved)
    finally:
        actorrt.shutdown()


def _operators() -> list[dict]:
    """The flow's operator actors, each with its node."""
    return [{**a, "node": n["node"]} for n in actorrt.stats()["nodes"] for a in n["actors"]
            if "wordcount/" in a.get("label", "")]
