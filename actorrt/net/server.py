"""gRPC servers and channels: authenticated services, and requests that fail alone.

A service is served from the same-named coroutines of a plain object (``add_service``). Every
call must carry the cluster token; a request that does not parse, or that its handler rejects,
is answered with INVALID_ARGUMENT and disturbs no other call. With ``TlsFiles`` servers and
channels speak mutual TLS (``net/tls.py``); without, plaintext.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError, Message
from grpc import aio

from actorrt.net.auth import token_ok
from actorrt.net.tls import TlsFiles

CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    # A head that restarts is back in about a second: try again that often, not after gRPC's
    # default backoff (up to 2 minutes), so that what waits for it goes on as soon as it serves.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
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


async def _abort_invalid(context: aio.ServicerContext, detail: str) -> None:
    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, detail)


def _guard_unary(behavior: Callable, token: str) -> Callable:
    async def handle(request: Any, context: aio.ServicerContext) -> Any:
        if not token_ok(context, token):
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
        if not token_ok(context, token):
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
        behavior = getattr(servicer, method.name)
        kwargs = dict(
            request_deserializer=_tolerant(request_cls.FromString),
            response_serializer=as_bytes,
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
                       token: str, tls: TlsFiles | None = None) -> tuple[aio.Server, str]:
    """Start a gRPC server on ``host:port`` (port 0 picks one); returns it and its address.

    With ``tls``, clients must present a certificate of the cluster's CA, and its certificate must
    name ``host`` (ClusterError if not: peers would refuse it).
    """
    server = aio.server(options=SERVER_OPTIONS)
    for servicer, service in services:
        add_service(server, servicer, service, token)
    if tls is None:
        bound = server.add_insecure_port(f"{host}:{port}")
    else:
        tls.check_names(host)
        bound = server.add_secure_port(f"{host}:{port}", tls.server_credentials())
    if bound == 0:
        raise OSError(f"cannot bind {host}:{port}")
    await server.start()
    return server, f"{host}:{bound}"


def channel(address: str, tls: TlsFiles | None = None) -> aio.Channel:
    """A channel to ``address``: mutual TLS with ``tls`` (the server must be one of the CA's and be
    named by the host part of ``address``), else plaintext."""
    if tls is None:
        return aio.insecure_channel(address, options=CHANNEL_OPTIONS)
    return aio.secure_channel(address, tls.channel_credentials(), options=CHANNEL_OPTIONS)


def as_bytes(message: bytes | Message) -> bytes:
    """A message's wire bytes (a message already framed as bytes is sent as it is)."""
    return message if isinstance(message, bytes) else message.SerializeToString()
