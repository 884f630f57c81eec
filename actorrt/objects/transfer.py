"""Large objects between hosts: a raw byte stream, pulled by the receiver into its own segment.

Control stays on the peer streams: a value's descriptor reaches a process of another host like
any message. That process then pulls the bytes from the process the descriptor names, over a TCP
connection of their own (``data_address``): a small request (the cluster token, which segment
and which use of it), answered by the buffers back to back. The sender writes straight from its
mapping (``sock_sendall`` of memoryviews, in 4 MiB chunks, TCP's window for flow control: several
chunks are always in flight); the receiver reads straight into a segment of its own arena
(``sock_recv_into``): no protobuf field, no join, one copy on each side. The received copy is
then an object of the receiver's host, mapped there like any other.

A pull may name a byte range of the first buffer (collective calls read slices of each other's
inputs), and a process may serve segments that are not objects (``also_serve``).

With TLS (``net/tls.py``) the connection is mutual TLS through asyncio's ssl layer: the server
requires a puller's certificate of the cluster's CA in the handshake, and the puller checks the
server's against the address it dialled. The puller still receives straight into its segment (the
ssl layer decrypts into it); the sender's ssl layer encrypts each chunk into buffers of its own.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable
from typing import Protocol

from actorrt.net.tls import TlsFiles
from actorrt.objects.shared import SharedObjects
from actorrt.rpc import common_pb2 as pb
from actorrt.util.background import BackgroundTasks

log = logging.getLogger(__name__)

CHUNK = 4 << 20
_LENGTH = struct.Struct("!I")
_MAX_REQUEST = 1 << 16
_HANDSHAKE_TIMEOUT_S = 10.0


class TransferError(ConnectionError):
    """The bytes of a shared object could not be pulled from the process that holds them."""


# Finds a segment that is not a shared object: its buffer's bytes, or None if it is not there.
Source = Callable[[pb.SharedObject], "memoryview | None"]


class TransferServer:
    """Answers pulls of this process's shared objects from processes of other hosts."""

    def __init__(self, shared: SharedObjects, token: str, tls: TlsFiles | None = None) -> None:
        self._shared = shared
        self._sources: list[Source] = []
        self._token = token.encode()
        self._tls = tls
        self._socket: socket.socket | None = None
        self._tls_server: asyncio.Server | None = None
        self._background = BackgroundTasks("transfer")
        self.address = ""
        self.sent_bytes = 0

    async def start(self, host: str) -> str:
        """Listen on ``host`` (port 0); returns ``host:port``."""
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, 0))
        sock.listen(64)
        sock.setblocking(False)
        self._socket = sock
        self.address = f"{host}:{sock.getsockname()[1]}"
        if self._tls is None:
            self._background.spawn(self._accept())
        else:  # asyncio's server runs the handshakes, on the same socket
            self._tls_server = await asyncio.start_server(
                lambda reader, writer: self._background.spawn(self._serve(_Stream(reader, writer))), sock=sock,
                ssl=self._tls.server_context, ssl_handshake_timeout=_HANDSHAKE_TIMEOUT_S)
        return self.address

    def also_serve(self, source: Source) -> None:
        """Answer pulls of the segments ``source`` finds, too."""
        self._sources.append(source)

    def _buffers(self, pull: pb.SharedPull) -> list[memoryview]:
        """What ``pull`` asks for. Raises LookupError if this process does not have it."""
        found = next((b for b in (source(pull.shared) for source in self._sources) if b is not None), None)
        buffers = [found] if found is not None else self._shared.read(pull.shared)
        if not pull.length:
            return buffers
        if pull.start + pull.length > buffers[0].nbytes:
            raise LookupError(f"bytes {pull.start}-{pull.start + pull.length} of a buffer of {buffers[0].nbytes}")
        return [buffers[0][pull.start:pull.start + pull.length]]

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            conn, _ = await loop.sock_accept(self._socket)
            conn.setblocking(False)
            self._background.spawn(self._serve(_Socket(loop, conn)))

    async def _serve(self, conn: _Connection) -> None:
        try:
            request = await _read_message(conn)
            pull = pb.SharedPull.FromString(request)
            if not hmac.compare_digest(pull.token.encode(), self._token):
                log.warning("refused a pull with a wrong token")
                return
            try:
                buffers = self._buffers(pull)
            except LookupError:
                await conn.send(_LENGTH.pack(0))  # gone here: the puller says so
                return
            await conn.send(_LENGTH.pack(1))
            for buf in buffers:
                for start in range(0, buf.nbytes, CHUNK):
                    await conn.send(buf[start:start + CHUNK])
                    self.sent_bytes += min(CHUNK, buf.nbytes - start)
            del buffers
        except (OSError, ValueError, asyncio.IncompleteReadError) as exc:
            log.debug("a pull ended early: %s", exc)
        finally:
            conn.close()

    async def aclose(self) -> None:
        self._background.cancel_all()
        if self._tls_server is not None:
            self._tls_server.close()
        if self._socket is not None:
            self._socket.close()


async def pull(shared: pb.SharedObject, into: SharedObjects, token: str,
               tls: TlsFiles | None = None) -> pb.SharedObject:
    """Copy the buffers ``shared`` names, from the process at its ``data_address``, into a segment
    of ``into``'s arena; returns the descriptor of that copy. With ``tls``, over mutual TLS.

    Raises:
        TransferError: the holder is unreachable, refused, or no longer has the object.
    """
    sizes = list(shared.lengths)
    segment = into.reserve(sizes)
    try:
        await _pull_into(pb.SharedPull(token=token, shared=shared), into.views_of(segment, sizes), tls)
    except BaseException:
        into.abandon(segment)
        raise
    return into.placed(segment, sizes)


async def pull_range(shared: pb.SharedObject, start: int, into: memoryview, token: str,
                     tls: TlsFiles | None = None) -> None:
    """Copy ``len(into)`` bytes of the first buffer ``shared`` names, from ``start``, into ``into``.

    Raises:
        TransferError: as ``pull``.
    """
    if into.nbytes:
        await _pull_into(pb.SharedPull(token=token, shared=shared, start=start, length=into.nbytes), [into], tls)


async def _pull_into(request: pb.SharedPull, views: list[memoryview], tls: TlsFiles | None) -> None:
    address = request.shared.data_address
    host, _, port = address.rpartition(":")
    data = request.SerializeToString()
    data = _LENGTH.pack(len(data)) + data
    try:
        if tls is None:
            await _pull_plain(address, host, int(port), data, views)
        else:
            await _pull_tls(address, host.strip("[]"), int(port), data, views, tls.client_context)
    except (OSError, asyncio.IncompleteReadError) as exc:
        if isinstance(exc, TransferError):
            raise
        raise TransferError(f"could not pull an object from {address}: {exc}") from exc


async def _pull_plain(address: str, host: str, port: int, request: bytes, views: list[memoryview]) -> None:
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        await loop.sock_connect(sock, (host.strip("[]"), port))
        await loop.sock_sendall(sock, request)
        if _LENGTH.unpack(await _read_exactly(loop, sock, _LENGTH.size))[0] != 1:
            raise TransferError(f"{address} no longer holds the object")
        for view in views:
            got = 0
            while got < view.nbytes:
                n = await loop.sock_recv_into(sock, view[got:got + CHUNK])
                if n == 0:
                    raise TransferError(f"{address} closed the transfer after {got} bytes")
                got += n
    finally:
        sock.close()


async def _pull_tls(address: str, host: str, port: int, request: bytes, views: list[memoryview],
                    context: ssl.SSLContext) -> None:
    status = memoryview(bytearray(_LENGTH.size))
    into = _Into([status, *views])
    transport, _ = await asyncio.get_running_loop().create_connection(
        lambda: into, host, port, ssl=context, server_hostname=host, ssl_handshake_timeout=_HANDSHAKE_TIMEOUT_S)
    try:
        transport.write(request)
        ended = await into.done
    finally:
        transport.close()
    if into.received >= _LENGTH.size and _LENGTH.unpack(status)[0] != 1:
        raise TransferError(f"{address} no longer holds the object")
    if ended is not None:
        raise TransferError(f"{address} closed the transfer after {into.received} bytes: {ended}")


class _Into(asyncio.BufferedProtocol):
    """A TLS stream received straight into ``views``, in order: the ssl layer decrypts into them.
    ``done`` gets None once they are full, or why the stream ended before."""

    def __init__(self, views: list[memoryview]) -> None:
        self._views = [v for v in views if v.nbytes]
        self._index = self._got = self.received = 0
        self.done: asyncio.Future[Exception | str | None] = asyncio.get_running_loop().create_future()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._index == len(self._views):  # bytes past what was asked for (none are sent): dropped
            return memoryview(bytearray(max(sizehint, 1)))
        return self._views[self._index][self._got:]

    def buffer_updated(self, nbytes: int) -> None:
        self.received += nbytes
        if self._index == len(self._views):
            return
        self._got += nbytes
        if self._got == self._views[self._index].nbytes:
            self._index, self._got = self._index + 1, 0
            if self._index == len(self._views) and not self.done.done():
                self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(exc or "end of stream")


class _Connection(Protocol):
    """A transfer server's side of a pull."""

    async def read_exactly(self, n: int) -> bytes: ...

    def send(self, data: bytes | memoryview) -> Awaitable[None]: ...

    def close(self) -> None: ...


class _Socket:
    """Plaintext: the loop's calls on the socket, which send straight from the caller's buffers."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        self._loop = loop
        self._sock = sock

    async def read_exactly(self, n: int) -> bytes:
        return await _read_exactly(self._loop, self._sock, n)

    def send(self, data: bytes | memoryview) -> Awaitable[None]:
        return self._loop.sock_sendall(self._sock, data)

    def close(self) -> None:
        self._sock.close()


class _Stream:
    """TLS: asyncio's streams over its ssl layer (which encrypts each chunk into buffers of its own)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read_exactly(self, n: int) -> bytes:
        return await self._reader.readexactly(n)

    async def send(self, data: bytes | memoryview) -> None:
        self._writer.write(data)
        await self._writer.drain()

    def close(self) -> None:
        self._writer.close()


async def _read_message(conn: _Connection) -> bytes:
    (length,) = _LENGTH.unpack(await conn.read_exactly(_LENGTH.size))
    if length > _MAX_REQUEST:
        raise ValueError(f"a pull request of {length} bytes")
    return await conn.read_exactly(length)


async def _read_exactly(loop: asyncio.AbstractEventLoop, sock: socket.socket, n: int) -> bytes:
    out = bytearray(n)
    view, got = memoryview(out), 0
    while got < n:
        k = await loop.sock_recv_into(sock, view[got:])
        if k == 0:
            raise asyncio.IncompleteReadError(bytes(out[:got]), n)
        got += k
    return bytes(out)
