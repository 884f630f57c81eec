"""gRPC plumbing: authenticated services, client channels, and batched peer streams.

Transport makes no protocol decisions: it moves ``PeerMessage`` batches between processes and hands
every received batch to a callback. Two processes share one long-lived bidirectional ``Connect``
stream; whoever needs it first opens it and the other side answers on its response half.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError, Message
from grpc import aio

from actorrt.background import BackgroundTasks
from actorrt.rpc import node_pb2

log = logging.getLogger(__name__)

TOKEN_METADATA = "x-actorrt-token"
PEER_METADATA = "x-actorrt-peer"

CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
]
SERVER_OPTIONS = [
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
    ("grpc.so_reuseport", 0),
]


class InvalidRequestError(ValueError):
    """A request that parsed but makes no sense; answered with INVALID_ARGUMENT."""


class _Malformed:
    """Stands in for a request whose bytes did not parse, so the handler can answer it."""

    def __init__(self, error: Exception) -> None:
        self.error = error


def _tolerant(parse: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def deserialize(data: bytes) -> Any:
        try:
            return parse(data)
        except (DecodeError, ValueError) as exc:
            return _Malformed(exc)

    return deserialize


def _token_ok(context: aio.ServicerContext, token: str) -> bool:
    sent = dict(context.invocation_metadata() or ()).get(TOKEN_METADATA, "")
    return hmac.compare_digest(sent.encode(), token.encode())


async def _abort_invalid(context: aio.ServicerContext, detail: str) -> None:
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, detail)


def _guard_unary(behavior: Callable, token: str) -> Callable:
    async def handle(request: Any, context: aio.ServicerContext) -> Any:
        if not _token_ok(context, token):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong cluster token")
        if isinstance(request, _Malformed):
            await _abort_invalid(context, f"malformed request: {request.error}")
        try:
            return await behavior(request, context)
        except InvalidRequestError as exc:
            await _abort_invalid(context, str(exc))

    return handle


async def check_message(message: Any, context: aio.ServicerContext) -> None:
    """Abort the stream with INVALID_ARGUMENT if ``message`` (read from it) did not parse.

    Stream handlers call this on every message they read (cheaper than wrapping the iterator).
    """
    if isinstance(message, _Malformed):
        await _abort_invalid(context, f"malformed message: {message.error}")


def _guard_stream(behavior: Callable, token: str) -> Callable:
    async def handle(requests: AsyncIterator[Any], context: aio.ServicerContext) -> Any:
        if not _token_ok(context, token):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong cluster token")
        try:
            return await behavior(requests, context)
        except InvalidRequestError as exc:
            await _abort_invalid(context, str(exc))

    return handle


def add_service(
    server: aio.Server, servicer: object, service: ServiceDescriptor, token: str
) -> None:
    """Serve every method of ``service`` from the same-named coroutine of ``servicer``.

    Each call must carry the cluster token (else UNAUTHENTICATED); a request that does not parse
    or that the handler rejects with ``InvalidRequestError`` gets INVALID_ARGUMENT (stream handlers
    pass each message they read to ``check_message``). Neither disturbs other calls. Streaming
    responses are written with ``context.write``.
    """
    handlers = {}
    for method in service.methods:
        request_cls = message_factory.GetMessageClass(method.input_type)
        response_cls = message_factory.GetMessageClass(method.output_type)
        behavior = getattr(servicer, method.name)
        kwargs = dict(
            request_deserializer=_tolerant(request_cls.FromString),
            response_serializer=_as_bytes if response_cls is node_pb2.PeerBatch else response_cls.SerializeToString,
        )
        if method.client_streaming and method.server_streaming:
            handler = grpc.stream_stream_rpc_method_handler(_guard_stream(behavior, token), **kwargs)
        elif method.client_streaming:
            handler = grpc.stream_unary_rpc_method_handler(_guard_stream(behavior, token), **kwargs)
        elif method.server_streaming:
            handler = grpc.unary_stream_rpc_method_handler(_guard_unary(behavior, token), **kwargs)
        else:
            handler = grpc.unary_unary_rpc_method_handler(_guard_unary(behavior, token), **kwargs)
        handlers[method.name] = handler
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(service.full_name, handlers),)
    )


async def start_server(host: str, port: int, services: list[tuple[object, ServiceDescriptor]],
                       token: str) -> tuple[aio.Server, str]:
    """Start a gRPC server on ``host:port`` (port 0 picks one); returns it and its address."""
    server = aio.server(options=SERVER_OPTIONS)
    for servicer, service in services:
        add_service(server, servicer, service, token)
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"cannot bind {host}:{port}")
    await server.start()
    return server, f"{host}:{bound}"


def channel(address: str) -> aio.Channel:
    return aio.insecure_channel(address, options=CHANNEL_OPTIONS)


def metadata(token: str, **extra: str) -> tuple[tuple[str, str], ...]:
    return ((TOKEN_METADATA, token),) + tuple((k.replace("_", "-"), v) for k, v in extra.items())


# PeerMessage field numbers: what ``Router.send`` takes as the kind of a message.
SUBMIT = node_pb2.PeerMessage.SUBMIT_FIELD_NUMBER
RESULT = node_pb2.PeerMessage.RESULT_FIELD_NUMBER
FETCH = node_pb2.PeerMessage.FETCH_FIELD_NUMBER
OBJECT = node_pb2.PeerMessage.OBJECT_FIELD_NUMBER
LINEAGE = node_pb2.PeerMessage.LINEAGE_FIELD_NUMBER
_BATCH_ENTRY_TAG = bytes([node_pb2.PeerBatch.MESSAGES_FIELD_NUMBER << 3 | 2])
_VIEW_REVISION_TAG = bytes([node_pb2.PeerBatch.VIEW_REVISION_FIELD_NUMBER << 3 | 0])


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def frame(kind: int, message: Message) -> bytes:
    """``PeerBatch`` wire bytes holding one ``PeerMessage`` whose field ``kind`` is ``message``.

    Batches are the concatenation of such frames (repeated fields concatenate on the wire), so a
    message is serialized once, when sent, instead of being copied into a PeerMessage and then
    into a PeerBatch (two deep copies that cost more than the serialization itself).
    """
    body = message.SerializeToString()
    inner = bytes([kind << 3 | 2]) + _varint(len(body)) + body
    return _BATCH_ENTRY_TAG + _varint(len(inner)) + inner


def _as_bytes(message: bytes | Message) -> bytes:
    return message if isinstance(message, bytes) else message.SerializeToString()


OnBatch = Callable[[str, node_pb2.PeerBatch], None]
OnPeerLost = Callable[[str], None]


@dataclass
class SendCounters:
    """What a process wrote to its peer streams."""

    messages: int = 0
    batches: int = 0


class PeerLink:
    """The sending half of a stream to one peer.

    ``send`` never blocks: messages queue up while the previous batch is being written and go
    out together as one ``PeerBatch``, so a burst of small tasks costs one write.
    """

    def __init__(self, address: str, write: Callable[[bytes], Awaitable[None]], counters: SendCounters,
                 view_revision: Callable[[], int]) -> None:
        self.address = address
        self.counters = counters
        self._write = write
        self._view_revision = view_revision
        self._queue: list[bytes] = []  # frames
        self._wake = asyncio.Event()

    def send(self, kind: int, message: Message) -> None:
        self._queue.append(frame(kind, message))
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._queue = self._queue, []
            self.counters.messages += len(batch)
            self.counters.batches += 1
            # Stamped when written: never older than the view the messages were queued under.
            batch.append(_VIEW_REVISION_TAG + _varint(self._view_revision()))
            await self._write(b"".join(batch))


class Router:
    """Streams to peers, keyed by the peer's serving address.

    Incoming batches from any stream go to ``on_batch(peer_address, batch)``. When a stream ends,
    ``on_peer_lost(peer_address)`` runs and the next ``send`` opens a new one.
    """

    def __init__(self, own_address: str, token: str, on_batch: OnBatch, on_peer_lost: OnPeerLost,
                 view_revision: Callable[[], int]):
        self.own_address = own_address
        self._view_revision = view_revision
        self._token = token
        self._on_batch = on_batch
        self._on_peer_lost = on_peer_lost
        self._links: dict[str, PeerLink] = {}
        self._channels: dict[str, aio.Channel] = {}
        self._background = BackgroundTasks(f"router {own_address}")
        self.sent = SendCounters()

    def send(self, address: str, kind: int, message: Message) -> None:
        """Queue ``message`` as PeerMessage field ``kind`` (SUBMIT, RESULT, FETCH, OBJECT)."""
        link = self._links.get(address)
        if link is None:
            link = self._open(address)
        link.send(kind, message)

    def _open(self, address: str) -> PeerLink:
        chan = self._channels.get(address)
        if chan is None:
            chan = self._channels[address] = channel(address)
        connect = chan.stream_stream(
            "/actorrt.Node/Connect", request_serializer=_as_bytes, response_deserializer=node_pb2.PeerBatch.FromString
        )
        call = connect(metadata=metadata(self._token, x_actorrt_peer=self.own_address))
        link = PeerLink(address, call.write, self.sent, self._view_revision)
        self._links[address] = link
        self._background.spawn(self._pump(link, call, self._read_client(address, call)))
        return link

    async def _read_client(self, address: str, call: Any) -> None:
        async for batch in call:
            self._on_batch(address, batch)

    async def serve(self, requests: AsyncIterator[node_pb2.PeerBatch],
                    context: aio.ServicerContext) -> None:
        """The server side of ``Node.Connect``."""
        address = dict(context.invocation_metadata()).get(PEER_METADATA, "")
        if not address:
            raise InvalidRequestError(f"Connect needs the {PEER_METADATA} metadata")
        link = None
        if address not in self._links:
            link = self._links[address] = PeerLink(address, context.write, self.sent, self._view_revision)

        async def read() -> None:
            async for batch in requests:
                await check_message(batch, context)
                self._on_batch(address, batch)

        await self._pump(link, None, read())

    async def _pump(self, link: PeerLink | None, call: Any, reader: Awaitable) -> None:
        """Read (and write, with ``link``) one stream until either side of it ends."""
        halves = {asyncio.ensure_future(reader)}
        if link is not None:
            halves.add(asyncio.ensure_future(link.run()))
        try:
            done, _ = await asyncio.wait(halves, return_when=asyncio.FIRST_COMPLETED)
            for half in done:
                half.result()
        except (aio.AioRpcError, asyncio.InvalidStateError, grpc.RpcError) as exc:
            log.debug("stream to %s ended: %s", link.address if link else "?", exc)
        finally:
            for half in halves:
                half.cancel()
            if call is not None:
                call.cancel()
            if link is not None and self._links.get(link.address) is link:
                del self._links[link.address]
                self._close_channel(link.address)
                self._on_peer_lost(link.address)

    def forget(self, address: str) -> None:
        """Drop the stream and channel to a peer known to be gone."""
        if self._links.pop(address, None) is not None:
            self._close_channel(address)
            self._on_peer_lost(address)

    def _close_channel(self, address: str) -> None:
        chan = self._channels.pop(address, None)
        if chan is not None:
            self._background.spawn(chan.close())

    async def aclose(self) -> None:
        self._background.cancel_all()
        for chan in self._channels.values():
            await chan.close()
        self._channels.clear()
        self._links.clear()
