"""A driver whose head dies (its node processes and store shards die with it) says so once, and
fails what it waits for, and every later call, with a ClusterError that names the cause."""

from __future__ import annotations

import logging
import time

import pytest

import actorrt
from actorrt.core import context


@actorrt.remote
class Sleeper:
    def nap(self, seconds):
        time.sleep(seconds)
        return seconds


def test_losing_the_head_is_one_log_line_and_a_cluster_error_naming_it(cluster_with, caplog):
    with cluster_with(num_nodes=1, store_shards=1):
        sleeper = Sleeper.remote()
        assert actorrt.get(sleeper.nap.remote(0), timeout=30) == 0
        waiting = sleeper.nap.remote(60)
        with caplog.at_level(logging.DEBUG, logger="actorrt"):
            context.current().head_process.process.kill()
            with pytest.raises(actorrt.ClusterError, match="the head at .* is gone .*call actorrt.shutdown"):
                actorrt.get(waiting, timeout=60)
            with pytest.raises(actorrt.ClusterError, match="is gone"):
                actorrt.get(sleeper.nap.remote(0), timeout=10)
            time.sleep(3)  # no retry stream after the loss either
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert sum("reconnecting" in m for m in warnings) == 1, warnings
        assert sum("lineage store" in m for m in warnings) <= 1, warnings
        assert len(warnings) <= 4, warnings
