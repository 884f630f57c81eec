"""Nexmark's events through a flow: Q7's core (the highest bid of every tumbling window of event
time), at parallelism > 1, with a node killed mid-run, against a plain-Python computation."""

from __future__ import annotations

from actorrt.streaming import Dataflow, EventTime, Tumbling, nexmark
from actorrt.streaming.nexmark import Bid
from actorrt.streaming.testing import KillNodeAt


def _highest(best: int, bid: Bid) -> int:
    return max(best, bid.price)


def test_the_highest_bid_per_window_of_nexmark_events_survives_a_kill(cluster_with, tmp_path):
    events = list(nexmark.events(20_000, seed=5, rate=2_000.0))  # 10 s of event time
    oracle: dict[float, int] = {}
    for e in events:
        if isinstance(e, Bid):
            start = (e.date_time - nexmark.BASE_TIME_S) // 2.0 * 2.0 + nexmark.BASE_TIME_S
            oracle[start] = max(oracle.get(start, 0), e.price)
    with cluster_with(num_nodes=2, store_shards=1):
        flow = Dataflow("nexmark-q7", batch_size=200)
        (flow.source(events, parallelism=2, time=EventTime(lambda e: e.date_time))
         .filter(lambda e: isinstance(e, Bid))
         .map(KillNodeAt(6000, tmp_path / "killed"), parallelism=2)
         .key_by(lambda bid: "all")
         .window(Tumbling(2.0), lambda: 0, _highest, parallelism=2)
         .collect())
        result = flow.run(timeout=300)
    assert (tmp_path / "killed").exists()
    assert result.late == []
    got = {start: best for _, start, _, best in result.outputs}
    assert len(result.outputs) == len(got) == len(oracle)  # each window once
    assert got == oracle
