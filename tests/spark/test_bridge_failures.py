"""The bridge when an actor is gone for good: a clear error, not a hang."""

from __future__ import annotations

import pytest

import actorrt
import bridge


@actorrt.remote
class Sink:
    def take(self, batch):
        return batch.num_rows


def test_feeding_an_actor_lost_beyond_recovery_raises_naming_it(spark, cluster_with):
    with cluster_with(num_nodes=2, store_shards=1, ft="none"):  # no lineage: a killed node's actors are lost
        sink = Sink.options(node=1).remote()
        assert actorrt.get(sink.take.remote(spark.range(1).toArrow().to_batches()[0]), timeout=60) == 1
        actorrt.kill_node(1)
        df = spark.createDataFrame([(i,) for i in range(100)], "i long")
        with pytest.raises(actorrt.ActorRTError, match=sink.actor_id.hex()[:12]):
            bridge.feed(df, [sink], "take", batch_rows=10)
