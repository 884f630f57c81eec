"""Shared fixtures: real clusters (head, node processes, redis-server shards) on loopback."""

from __future__ import annotations

import contextlib

import pytest

import actorrt


@contextlib.contextmanager
def running_cluster(**options):
    info = actorrt.init(**options)
    try:
        yield info
    finally:
        actorrt.shutdown()


@pytest.fixture(scope="module")
def cluster():
    """A two-node embedded cluster shared by the tests of one module."""
    with running_cluster(num_nodes=2, store_shards=2) as info:
        yield info


@pytest.fixture
def fresh_cluster():
    """A two-node embedded cluster of the test's own (for tests that kill nodes)."""
    with running_cluster(num_nodes=2, store_shards=1) as info:
        yield info


@pytest.fixture
def cluster_with():
    """``with cluster_with(**init_options):`` runs an embedded cluster of the test's own choosing."""
    return running_cluster
