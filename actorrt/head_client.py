"""Talking to the head: registration, the heartbeat/view stream, admin calls."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import grpc
from grpc import aio

from actorrt.exceptions import ClusterError
from actorrt.rpc import head_pb2, head_pb2_grpc, node_pb2
from actorrt.transport import channel, metadata

log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL_S = 0.2


class HeadClient:
    def __init__(self, address: str, token: str) -> None:
        self.address = address
        self._metadata = metadata(token)
        self._channel = channel(address)
        self._stub = head_pb2_grpc.HeadStub(self._channel)

    async def _unary(self, name: str, request: object, timeout: float = 10.0) -> object:
        try:
            return await getattr(self._stub, name)(request, metadata=self._metadata, timeout=timeout)
        except aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
                raise ClusterError(f"the head at {self.address} rejected the cluster token") from None
            raise ClusterError(f"head {self.address}: {name} failed: {exc.code().name}: {exc.details()}") from None

    async def register(self, slot: int, address: str, pid: int, hostname: str) -> head_pb2.RegisterNodeReply:
        req = head_pb2.RegisterNodeRequest(slot=slot, address=address, pid=pid, hostname=hostname)
        return await self._unary("RegisterNode", req)

    async def kill_node(self, slot: int) -> int:
        reply = await self._unary("KillNode", head_pb2.KillNodeRequest(slot=slot))
        return reply.pid

    async def cluster_stats(self) -> head_pb2.ClusterStatsReply:
        return await self._unary("ClusterStats", head_pb2.ClusterStatsRequest())

    async def shutdown(self) -> None:
        await self._unary("Shutdown", head_pb2.ShutdownRequest(), timeout=30.0)

    async def subscribe(
        self,
        on_view: Callable[[head_pb2.ClusterView], None],
        heartbeat: Callable[[], head_pb2.Heartbeat],
        first_view: asyncio.Future | None = None,
    ) -> None:
        """Send heartbeats and apply views until the stream ends; raises ClusterError then."""

        async def beats():
            while True:
                yield heartbeat()
                await asyncio.sleep(HEARTBEAT_INTERVAL_S)

        call = self._stub.Subscribe(beats(), metadata=self._metadata)
        try:
            async for view in call:
                on_view(view)
                if first_view is not None and not first_view.done():
                    first_view.set_result(view)
        except aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
                raise ClusterError(f"the head at {self.address} rejected the cluster token") from None
            raise ClusterError(f"lost the head at {self.address}: {exc.code().name}") from None
        finally:
            call.cancel()
        raise ClusterError(f"the head at {self.address} closed the stream")

    async def aclose(self) -> None:
        await self._channel.close()


def empty_stats() -> node_pb2.NodeStatsReply:
    return node_pb2.NodeStatsReply(slot=-1)
