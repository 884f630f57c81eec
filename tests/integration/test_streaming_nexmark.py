"""Nexmark's queries that need no join (Q0, Q1, Q2, Q7) over Nexmark's events, at parallelism 2
with a node killed mid-run, each against a plain-Python computation of its answer."""

from __future__ import annotations

import collections
from dataclasses import replace

import pytest

from actorrt.streaming import Dataflow, EventTime, nexmark
from actorrt.streaming import nexmark_queries as queries
from actorrt.streaming.nexmark import Bid
from actorrt.streaming.testing import KillNodeAt

EVENTS = list(nexmark.events(20_000, seed=5, rate=1_000.0))  # 20 s of event time
BIDS = [e for e in EVENTS if isinstance(e, Bid)]


def _highest_per_window(window_s: float) -> collections.Counter:
    best: dict[float, Bid] = {}
    for bid in BIDS:
        start = bid.date_time // window_s * window_s  # windows start at multiples of their size
        held = best.get(start)
        if held is None or (bid.price, -bid.auction, -bid.bidder) > (held.price, -held.auction, -held.bidder):
            best[start] = bid
    return collections.Counter(best.items())


ORACLES = {
    "q0": lambda: collections.Counter(EVENTS),
    "q1": lambda: collections.Counter(replace(b, price=round(b.price * 0.908)) for b in BIDS),
    "q2": lambda: collections.Counter((b.auction, b.price) for b in BIDS if b.auction % 123 == 0),
    "q7": lambda: _highest_per_window(queries.Q7_WINDOW_S),
}


def _answer(name: str, outputs: list) -> collections.Counter:
    if name == "q7":
        return collections.Counter((start, bid) for _, start, _, bid in outputs)
    return collections.Counter(outputs)


@pytest.mark.parametrize("name", sorted(ORACLES))
def test_a_nexmark_query_survives_a_kill_with_the_oracles_answer(name, cluster_with, tmp_path):
    with cluster_with(num_nodes=2, store_shards=1):
        flow = Dataflow(f"nexmark-{name}", batch_size=200)
        events = (flow.source(EVENTS, parallelism=2, time=EventTime(lambda e: e.date_time))
                  .map(KillNodeAt(6000, tmp_path / "killed"), parallelism=2))
        getattr(queries, name)(events).collect()
        result = flow.run(timeout=300)
    assert (tmp_path / "killed").exists()
    assert result.late == []
    answer = _answer(name, result.outputs)
    assert answer == ORACLES[name]()
    assert answer  # (each query has results on this input)


def _count(n: int, bid: Bid) -> int:
    return n + 1


def test_a_fold_that_emits_only_its_final_states_gives_one_per_key_after_a_kill(cluster_with, tmp_path):
    """Bids per auction, each auction's count once (not every update), at the end of the input."""
    with cluster_with(num_nodes=2, store_shards=1):
        flow = Dataflow("bids-per-auction", batch_size=200)
        (flow.source(EVENTS, parallelism=2)
         .filter(queries.is_bid)
         .map(KillNodeAt(6000, tmp_path / "killed"), parallelism=2)
         .key_by(lambda bid: bid.auction)
         .fold(lambda: 0, _count, parallelism=3, emit="final")
         .collect())
        result = flow.run(timeout=300)
    assert (tmp_path / "killed").exists()
    assert sorted(result.outputs) == sorted(collections.Counter(b.auction for b in BIDS).items())
    with pytest.raises(ValueError, match="emit"):
        Dataflow("x").source([]).key_by(lambda r: r).fold(lambda: 0, _count, emit="sometimes")
