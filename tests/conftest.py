"""Shared fixtures: real clusters (head, node processes, redis-server shards) on loopback."""

from __future__ import annotations

import pytest

import actorrt


@pytest.fixture(scope="module")
def cluster():
    """A two-node embedded cluster shared by the tests of one module."""
    info = actorrt.init(num_nodes=2, store_shards=2)
    try:
        yield info
    finally:
        actorrt.shutdown()


@pytest.fixture
def fresh_cluster():
    """A two-node embedded cluster of the test's own (for tests that kill nodes)."""
    info = actorrt.init(num_nodes=2, store_shards=1)
    try:
        yield info
    finally:
        actorrt.shutdown()
