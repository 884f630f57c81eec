"""Peer streams: batched messages between processes over long-lived gRPC streams.

They make no protocol decisions: they move ``PeerMessage`` batches between processes and hand
every received batch to a callback. Two processes share one long-lived bidirectional ``Connect``
stream; whoever needs it first opens it and the other side answers on its response half.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import Message
from grpc import aio

from actorrt.net.auth import PEER_METADATA, metadata
from actorrt.net.server import InvalidRequestError, as_bytes, channel, check_message
from actorrt.net.tls import TlsFiles
from actorrt.rpc import node_pb2
from actorrt.util.background import BackgroundTasks
from actorrt.util.lease import Lease

log = logging.getLogger(__name__)

# PeerMessage field numbers: what ``Router.send`` takes as the kind of a message.
SUBMIT = node_pb2.PeerMessage.SUBMIT_FIELD_NUMBER
RESULT = node_pb2.PeerMessage.RESULT_FIELD_NUMBER
FETCH = node_pb2.PeerMessage.FETCH_FIELD_NUMBER
OBJECT = node_pb2.PeerMessage.OBJECT_FIELD_NUMBER
LINEAGE = node_pb2.PeerMessage.LINEAGE_FIELD_NUMBER
PUSH = node_pb2.PeerMessage.PUSH_FIELD_NUMBER
CHECKPOINTED = node_pb2.PeerMessage.CHECKPOINTED_FIELD_NUMBER
COMMITTED = node_pb2.PeerMessage.COMMITTED_FIELD_NUMBER
CANCEL = node_pb2.PeerMessage.CANCEL_FIELD_NUMBER
RELEASE = node_pb2.PeerMessage.RELEASE_FIELD_NUMBER
CHANNEL = node_pb2.PeerMessage.CHANNEL_FIELD_NUMBER
PASSED = node_pb2.PeerMessage.PASSED_FIELD_NUMBER
STANDBY_LOADED = node_pb2.PeerMessage.STANDBY_LOADED_FIELD_NUMBER
_BATCH_ENTRY_TAG = bytes([node_pb2.PeerBatch.MESSAGES_FIELD_NUMBER << 3 | 2])
_VIEW_REVISION_TAG = bytes([node_pb2.PeerBatch.VIEW_REVISION_FIELD_NUMBER << 3 | 0])
_SENDER_EPOCH_TAG = bytes([node_pb2.PeerBatch.SENDER_EPOCH_FIELD_NUMBER << 3 | 0])
_SENDER_SLOT_TAG = bytes([node_pb2.PeerBatch.SENDER_SLOT_FIELD_NUMBER << 3 | 0])
_SENDER_PID_TAG = bytes([node_pb2.PeerBatch.SENDER_PID_FIELD_NUMBER << 3 | 0])
_SENDER_HOST_TAG = bytes([node_pb2.PeerBatch.SENDER_HOST_FIELD_NUMBER << 3 | 2])
_SENDER_SERIAL_TAG = bytes([node_pb2.PeerBatch.SENDER_SERIAL_FIELD_NUMBER << 3 | 0])


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
    out together as one ``PeerBatch``, so a burst of small tasks costs one write. ``send_soon``
    queues a message that can wait a little: it goes with the next batch, or after ``within``
    seconds if none goes before (a stream write costs far more CPU than a message in it, so
    notices that nobody waits on ride along with the traffic). Nothing is written while the
    process's lease is over. Every batch carries ``serial``: which of this process's streams to
    the peer it went on (what was queued on an earlier one may be lost).
    """

    def __init__(self, address: str, write: Callable[[bytes], Awaitable[None]], counters: SendCounters,
                 trailer: Callable[[], bytes], lease: Lease, serial: int = 0) -> None:
        self.address = address
        self.counters = counters
        self.serial = serial
        self._write = write
        self._trailer = trailer
        self._serial_field = _SENDER_SERIAL_TAG + _varint(serial)
        self._lease = lease
        self._queue: list[bytes] = []  # frames
        self._wake = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None  # wakes the link for messages sent soon

    def send(self, kind: int, message: Message) -> None:
        self._queue.append(frame(kind, message))
        self._wake.set()

    def send_soon(self, kind: int, message: Message, within: float) -> None:
        self._queue.append(frame(kind, message))
        if self._timer is None and not self._wake.is_set():
            self._timer = asyncio.get_running_loop().call_later(within, self._wake.set)

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            if not self._lease.valid():
                await self._lease.held()
            self._wake.clear()
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            batch, self._queue = self._queue, []
            self.counters.messages += len(batch)
            self.counters.batches += 1
            batch.append(self._trailer())
            batch.append(self._serial_field)
            await self._write(b"".join(batch))


class Router:
    """Streams to peers, keyed by the peer's serving address.

    Incoming batches from any stream go to ``on_batch(peer_address, batch)``. When a stream ends
    (the one this process writes on, or one it only reads), ``on_peer_lost(peer_address)`` runs,
    and the next ``send`` opens a new one if this process wrote on it. Each new stream this process
    writes on to a peer gets the next serial (from 1, per peer address), stamped on its batches.
    """

    def __init__(self, own_address: str, token: str, on_batch: OnBatch, on_peer_lost: OnPeerLost,
                 view_revision: Callable[[], int], lease: Lease, identity: tuple[int, str] = (0, ""),
                 tls: TlsFiles | None = None):
        self.own_address = own_address
        self._tls = tls
        pid, host = identity
        # Who sends (pid, host identity), on every batch: a peer learns it from the first it gets.
        self._identity = _SENDER_PID_TAG + _varint(pid) + _SENDER_HOST_TAG + _varint(len(host.encode())) + host.encode()
        self._view_revision = view_revision
        self._lease = lease
        self._incarnation = b""  # this node's slot and epoch fields, once it has them
        self._token = token
        self._on_batch = on_batch
        self._on_peer_lost = on_peer_lost
        self._links: dict[str, PeerLink] = {}
        self._serials: dict[str, int] = {}  # peer address -> the serial of the last stream written to it
        self._channels: dict[str, aio.Channel] = {}
        self._background = BackgroundTasks(f"router {own_address}")
        self.sent = SendCounters()

    def set_incarnation(self, slot: int, epoch: int) -> None:
        """Stamp every batch with this node incarnation from now on."""
        self._incarnation = _SENDER_SLOT_TAG + _varint(slot) + _SENDER_EPOCH_TAG + _varint(epoch)

    def _trailer(self) -> bytes:
        # The view revision is stamped when written: never older than the view the messages were
        # queued under.
        return _VIEW_REVISION_TAG + _varint(self._view_revision()) + self._incarnation + self._identity

    def _link(self, address: str, write: Callable[[bytes], Awaitable[None]]) -> PeerLink:
        serial = self._serials[address] = self._serials.get(address, 0) + 1
        link = self._links[address] = PeerLink(address, write, self.sent, self._trailer, self._lease, serial)
        return link

    def send(self, address: str, kind: int, message: Message) -> None:
        """Queue ``message`` as PeerMessage field ``kind`` (SUBMIT, RESULT, FETCH, OBJECT)."""
        self._link_to(address).send(kind, message)

    def send_soon(self, address: str, kind: int, message: Message, within: float) -> None:
        """Queue ``message`` to go with the next batch to ``address``, or within ``within`` seconds."""
        self._link_to(address).send_soon(kind, message, within)

    def _link_to(self, address: str) -> PeerLink:
        link = self._links.get(address)
        return link if link is not None else self._open(address)

    def _open(self, address: str) -> PeerLink:
        chan = self._channels.get(address)
        if chan is None:
            chan = self._channels[address] = channel(address, self._tls)
        connect = chan.stream_stream(
            "/actorrt.Node/Connect", request_serializer=as_bytes, response_deserializer=node_pb2.PeerBatch.FromString
        )
        call = connect(metadata=metadata(self._token, x_actorrt_peer=self.own_address))
        link = self._link(address, call.write)
        self._background.spawn(self._pump(address, link, call, self._read_client(address, call)))
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
            link = self._link(address, context.write)

        async def read() -> None:
            async for batch in requests:
                await check_message(batch, context)
                self._on_batch(address, batch)

        await self._pump(address, link, None, read())

    async def _pump(self, address: str, link: PeerLink | None, call: Any, reader: Awaitable) -> None:
        """Read (and write, with ``link``) one stream with ``address`` until either side of it ends.
        Its end is reported either way: batches the peer wrote on it may be lost, even while this
        process's own stream to the peer lives on (both dialled at once)."""
        halves = {asyncio.ensure_future(reader)}
        if link is not None:
            halves.add(asyncio.ensure_future(link.run()))
        try:
            done, _ = await asyncio.wait(halves, return_when=asyncio.FIRST_COMPLETED)
            for half in done:
                half.result()
        except (aio.AioRpcError, asyncio.InvalidStateError, grpc.RpcError) as exc:
            log.debug("stream with %s ended: %s", address, exc)
        finally:
            for half in halves:
                half.cancel()
            if call is not None:
                call.cancel()
            if link is None:
                self._on_peer_lost(address)
            elif self._links.get(link.address) is link:
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
