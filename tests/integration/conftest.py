"""Fixtures of the integration tests beyond the cluster's (tests/conftest.py)."""

from __future__ import annotations

import pytest

from actorrt.store.redis_server import RedisShard


@pytest.fixture
async def streams(tmp_path):
    """A redis-server of the test's own, apart from the lineage store, for sources and sinks."""
    shard = await RedisShard.start(tmp_path / "streams", "pw")
    try:
        yield f"redis://:pw@{shard.address}/0"
    finally:
        await shard.stop()
