"""A deterministic actor (``nondeterministic=False``) fed by several senders runs their tasks interleaved in
whatever order they arrive; after a failure its replay must run them in that same order, or the
state it rebuilds contradicts what its callers saw. Oracle: the position each caller was told its
entry went to, against the rebuilt log."""

from __future__ import annotations

import pytest

import actorrt
from tests.integration.test_heir import Log, Producer  # a log, and actors that append to it


@pytest.mark.parametrize("checkpoint_every", [None, 7])
def test_a_deterministic_actor_fed_by_three_senders_replays_the_order_it_ran_them_in(cluster_with, checkpoint_every):
    with cluster_with(num_nodes=3, store_shards=1):
        log = Log.options(node=2, nondeterministic=False, checkpoint_every=checkpoint_every).remote()
        producers = {name: Producer.options(node=i).remote(name, log) for i, name in enumerate("ab")}
        calls = []
        for k in range(1, 41):
            calls += [(name, k, p.produce.remote()) for name, p in producers.items()]
            calls.append(("driver", k, log.append.remote(("driver", k))))
        positions = actorrt.get([ref for _, _, ref in calls], timeout=60)
        actorrt.kill_node(2)
        entries = actorrt.get(log.state.remote(), timeout=120)
        assert sorted(positions) == list(range(1, 121))
        assert [entries[pos - 1] for pos in positions] == [(name, k) for name, k, _ in calls]
        assert actorrt.get(log.append.remote(("driver", 41)), timeout=60) == 121
