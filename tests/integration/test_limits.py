"""Input that could wedge a process gets a clear error at the call that made it, and the cluster
goes on: a call whose spec would be over the size limit, and a driver whose stash is full because
the lineage store stopped answering."""

from __future__ import annotations

import os
import signal
import time

import pytest

import actorrt
from actorrt.core import context, submitter
from actorrt.exceptions import ClusterError
from actorrt.lineage.options import MAX_SPEC_BYTES


@actorrt.remote
class Counter:
    def __init__(self):
        self.n = 0

    def add(self, k, *blobs):
        self.n += k
        return self.n


def test_an_oversized_call_and_a_full_stash_fail_their_call_and_nothing_else(cluster_with, monkeypatch):
    with cluster_with(num_nodes=1, store_shards=1, stash_limit=50, inline_max_bytes=MAX_SPEC_BYTES // 2):
        counter = Counter.remote()
        blob = b"x" * (MAX_SPEC_BYTES // 2 - 1000)  # inline, each: three are over the limit
        with pytest.raises(ValueError, match=f"over the limit of {MAX_SPEC_BYTES}.*inline_max_bytes"):
            counter.add.remote(1, blob, blob, blob)
        assert actorrt.get(counter.add.remote(1, blob), timeout=60) == 1  # nothing was sent; the actor serves

        monkeypatch.setattr(submitter, "STASH_FULL_TIMEOUT_S", 2.0)
        shard = context.current().worker.membership.view.store_shards[0].pid
        os.kill(shard, signal.SIGSTOP)  # the store hangs: no write is acked, stashes only grow
        try:
            sent, started = [], time.monotonic()
            with pytest.raises(ClusterError, match="stash of this process is full .*is the store reachable"):
                for _ in range(200):
                    sent.append(counter.add.remote(1))
            assert 40 <= len(sent) <= 50 and time.monotonic() - started < 30
        finally:
            os.kill(shard, signal.SIGCONT)
        # Every call made before the error runs once; the one that raised was not submitted.
        assert actorrt.get(sent, timeout=60) == list(range(2, 2 + len(sent)))
        assert actorrt.get(counter.add.remote(0), timeout=60) == 1 + len(sent)
