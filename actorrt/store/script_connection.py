"""One lean connection to a Redis shard for the lineage store's hot path: its script calls.

Every flush of a process's stash is one ``EVALSHA`` of the write script on its shard (and a
checkpoint pointer one more). Through redis-py's asyncio client such a call cost its caller about
290 µs of CPU (the connection pool, the retry wrapper, the stream reader and the ``Script``
object around one command); written straight to a uvloop transport, with hiredis packing the
command and parsing the reply, it costs about 70 µs. Everything else the store does (recovery
reads, the index, collection, fences) is rare and stays on redis-py.

Calls are pipelined: replies come back in the order the commands were written, so each waits on
a future in a FIFO. With ``replicas``, each script call is followed on the same connection by a
write of its own (``INCR`` of a key in the call's slot) and ``WAIT``: its reply comes once that
many replicas hold that write, and so every write the shard applied before it (it replicates in
order), the call's included, also when the call wrote nothing because a try of it on a lost
connection already had. So a write is acked only when a replica promoted in the shard's place
would hold it. Fewer within ``WAIT_TIMEOUT_MS`` fail the call with ``NOREPLICAS``, which callers
retry as a shard failing over.

A lost connection fails the calls under way with ``ConnectionError``, and the next call opens a
new one. A shard that restarted has forgotten its scripts: ``NOSCRIPT`` loads the script and
calls again.
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from hashlib import sha1

import hiredis
from redis.exceptions import AuthenticationError, ResponseError

from actorrt.store.tls import StoreTls

CONNECT_TIMEOUT_S = 2.0
WAIT_TIMEOUT_MS = 2000


def sync_key(key: bytes) -> bytes:
    """A key in ``key``'s slot, written to make waiting for replicas cover what came before."""
    start = key.find(b"{")
    end = key.find(b"}", start + 1)
    tag = key[start + 1:end] if start >= 0 and end > start + 1 else key
    return b"sync:{" + tag + b"}"


@functools.cache
def _digest(source: str) -> str:
    return sha1(source.encode()).hexdigest()


class _Replies(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._reader = hiredis.Reader(replyError=ResponseError)
        self._waiting: deque[asyncio.Future] = deque()
        self.lost: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        while self._waiting:
            reply = self._reader.gets()
            if reply is False:
                return
            future = self._waiting.popleft()
            if not future.done():  # (its caller may have been cancelled)
                if isinstance(reply, ResponseError):
                    future.set_exception(reply)
                else:
                    future.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = ConnectionError(f"connection to the shard lost: {exc or 'closed by the server'}")
        while self._waiting:
            future = self._waiting.popleft()
            if not future.done():
                future.set_exception(self.lost)

    def call(self, command: tuple) -> asyncio.Future:
        return self.calls(command)[0]

    def calls(self, *commands: tuple) -> list[asyncio.Future]:
        """The replies to ``commands``, written at once."""
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in commands]
        if self.lost is not None:
            for future in futures:
                future.set_exception(self.lost)
        else:
            self._waiting.extend(futures)
            self.transport.write(b"".join(hiredis.pack_command(c) for c in commands))
        return futures


class ScriptConnection:
    """Script calls to one shard (``host:port``), over one pipelined connection (TLS with ``tls``)."""

    def __init__(self, address: str, password: str | None = None, username: str | None = None,
                 tls: StoreTls | None = None, replicas: int = 0) -> None:
        host, _, port = address.rpartition(":")
        self.address = address
        self._host, self._port = host, int(port)
        self._tls = tls
        self._replicas = replicas  # replicas that must hold a call's writes before it returns
        self._password = password
        self._username = username  # a Redis ACL user (None: the default user)
        self._replies: _Replies | None = None
        self._opening: asyncio.Lock | None = None
        self._loaded: set[str] = set()  # digests of the scripts this connection's shard has

    async def _connection(self) -> _Replies:
        if self._replies is not None and self._replies.lost is None:
            return self._replies
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:  # one connection, whoever asks first
            if self._replies is None or self._replies.lost is not None:
                self._replies = await self._open()
                self._loaded.clear()  # the shard may have restarted
        return self._replies

    async def _open(self) -> _Replies:
        loop = asyncio.get_running_loop()
        try:
            transport, replies = await asyncio.wait_for(
                loop.create_connection(_Replies, self._host, self._port,
                                       ssl=self._tls.client_context if self._tls else None), CONNECT_TIMEOUT_S)
        except TimeoutError as exc:
            raise ConnectionError(f"no answer from {self._host}:{self._port} in {CONNECT_TIMEOUT_S} s") from exc
        if self._password is not None:
            try:
                await replies.call(("AUTH", *([self._username] if self._username else []), self._password))
            except ResponseError as exc:
                transport.close()
                raise AuthenticationError(str(exc)) from None
        return replies

    async def run_script(self, source: str, keys: list[bytes], args: list) -> object:
        """``EVALSHA`` of ``source`` over ``keys`` and ``args``, loading the script where the shard
        lacks it. The scripts are idempotent, so a call whose connection was lost goes once more
        on a new one (a shard restarted since the last call, as redis-py's retry would)."""
        try:
            return await self._run_script(source, keys, args)
        except ConnectionError:
            return await self._run_script(source, keys, args)

    async def _run_script(self, source: str, keys: list[bytes], args: list) -> object:
        digest = _digest(source)
        replies = await self._connection()
        if digest not in self._loaded:
            await replies.call(("SCRIPT", "LOAD", source))
            self._loaded.add(digest)
        command = ("EVALSHA", digest, len(keys), *keys, *args)
        try:
            return await self._replicated(replies, command, keys[0])
        except ResponseError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
            await replies.call(("SCRIPT", "LOAD", source))  # flushed under us
            return await self._replicated(replies, command, keys[0])

    async def _replicated(self, replies: _Replies, command: tuple, key: bytes) -> object:
        if not self._replicas:
            return await replies.call(command)
        # Every reply is awaited whatever the first is, so that none is left unretrieved.
        result, _, held_by = await asyncio.gather(
            *replies.calls(command, ("INCR", sync_key(key)), ("WAIT", self._replicas, WAIT_TIMEOUT_MS)),
            return_exceptions=True)
        for reply in (result, held_by):
            if isinstance(reply, BaseException):
                raise reply
        if held_by < self._replicas:
            raise ResponseError(f"NOREPLICAS {held_by} of {self._replicas} replicas of {self.address} "
                                f"acknowledged the write within {WAIT_TIMEOUT_MS} ms")
        return result

    async def aclose(self) -> None:
        if self._replies is not None and self._replies.transport is not None:
            self._replies.transport.close()
        self._replies = None
