"""Every Nexmark query (Q0-Q8) over Nexmark's events, at parallelism 2 with a node killed mid-run,
each against a plain-Python computation of its answer (``tests/support/nexmark_oracles.py``)."""

from __future__ import annotations

import collections

import pytest

from actorrt.streaming import Dataflow, EventTime, nexmark
from actorrt.streaming import nexmark_queries as queries
from actorrt.streaming.nexmark import Bid
from actorrt.streaming.testing import KillNodeAt
from tests.support import nexmark_oracles as oracles

RATE = 1_000.0
EVENTS = list(nexmark.events(20_000, seed=5, rate=RATE))  # 20 s of event time
BIDS = [e for e in EVENTS if isinstance(e, Bid)]


# The stateful ones (a join, sliding windows, a window join): every query meets its oracle without a
# kill in tests/unit/test_nexmark_queries.py, and bench/nexmark.py runs Q3 and Q8 around a kill.
@pytest.mark.parametrize("name", ["q3", "q5", "q8"])
def test_a_nexmark_query_survives_a_kill_with_the_oracles_answer(name, cluster_with, tmp_path):
    with cluster_with(num_nodes=2, store_shards=1):
        flow = Dataflow(f"nexmark-{name}", batch_size=200)
        events = (flow.source(EVENTS, parallelism=2, time=EventTime(lambda e: e.date_time))
                  .map(KillNodeAt(6000, tmp_path / "killed"), parallelism=2))
        queries.query(name, events, RATE).collect()
        result = flow.run(timeout=300)
    assert (tmp_path / "killed").exists()
    assert result.late == []
    answer = oracles.answer(name, result.outputs)
    assert answer == oracles.oracle(name, EVENTS)
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
