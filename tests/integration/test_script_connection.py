"""The lineage store's lean script connection against a real redis-server: pipelined replies in
order, errors as redis-py raises them, and a shard that restarts under it."""

import asyncio

import pytest
from redis.exceptions import AuthenticationError, ResponseError

from actorrt.store.redis_server import RedisShard
from actorrt.store.script_connection import ScriptConnection

ECHO = "return {KEYS[1], ARGV[1]}"
FAIL = "return redis.error_reply('FENCED: no')"


@pytest.fixture
async def shard(tmp_path):
    started = await RedisShard.start(tmp_path / "s", "pw")
    try:
        yield started
    finally:
        await started.stop()


async def test_pipelined_calls_get_their_own_replies_in_order(shard):
    connection = ScriptConnection(shard.address, "pw")
    try:
        replies = await asyncio.gather(*(connection.run_script(ECHO, [b"k%d" % i], [i]) for i in range(200)))
        assert replies == [[b"k%d" % i, b"%d" % i] for i in range(200)]
        with pytest.raises(ResponseError, match="^FENCED: no"):
            await connection.run_script(FAIL, [b"k"], [])
        assert await connection.run_script(ECHO, [b"after"], [b"an error"]) == [b"after", b"an error"]
    finally:
        await connection.aclose()


async def test_a_flushed_script_is_loaded_again(shard):
    connection, other = ScriptConnection(shard.address, "pw"), ScriptConnection(shard.address, "pw")
    try:
        assert await connection.run_script(ECHO, [b"k"], [1]) == [b"k", b"1"]
        await (await other._connection()).call(("SCRIPT", "FLUSH"))
        assert await connection.run_script(ECHO, [b"k"], [2]) == [b"k", b"2"]  # NOSCRIPT: loaded, called again
    finally:
        await connection.aclose()
        await other.aclose()


async def test_a_shard_that_restarted_is_reached_again_and_a_dead_one_is_a_connection_error(shard, tmp_path):
    connection = ScriptConnection(shard.address, "pw")
    try:
        assert await connection.run_script(ECHO, [b"k"], [1]) == [b"k", b"1"]
        await shard.stop()
        with pytest.raises(ConnectionError):
            await connection.run_script(ECHO, [b"k"], [2])
        restarted = await RedisShard.start(tmp_path / "s", "pw", port=shard.port)
        try:
            assert await connection.run_script(ECHO, [b"k"], [3]) == [b"k", b"3"]
        finally:
            await restarted.stop()
    finally:
        await connection.aclose()


async def test_a_wrong_password_is_an_authentication_error(shard):
    connection = ScriptConnection(shard.address, "not-the-password")
    try:
        with pytest.raises(AuthenticationError):
            await connection.run_script(ECHO, [b"k"], [1])
    finally:
        await connection.aclose()
