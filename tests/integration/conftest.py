"""Fixtures of the integration tests beyond the cluster's (tests/conftest.py)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from actorrt.store.redis_server import RedisShard


@contextlib.asynccontextmanager
async def _redis_server(directory: Path) -> AsyncIterator[RedisShard]:
    shard = await RedisShard.start(directory, "pw")
    try:
        yield shard
    finally:
        await shard.stop()


@pytest.fixture
async def streams(tmp_path):
    """A redis-server of the test's own, apart from the lineage store, for sources and sinks."""
    async with _redis_server(tmp_path / "streams") as shard:
        yield f"redis://:pw@{shard.address}/0"


@pytest.fixture
async def external_store(tmp_path):
    """A redis-server of the test's own as an external lineage store: its URL."""
    async with _redis_server(tmp_path / "store") as shard:
        yield f"redis://:pw@{shard.address}"
