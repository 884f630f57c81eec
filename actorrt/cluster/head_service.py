"""The ``Head`` gRPC service: what nodes, drivers and the CLI ask of the head."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from grpc import aio

from actorrt.net.server import InvalidRequestError, check_message
from actorrt.rpc import head_pb2

if TYPE_CHECKING:
    from actorrt.cluster.head import Head


class HeadServicer:
    def __init__(self, head: Head) -> None:
        self.head = head
        self._names_changing = asyncio.Lock()  # one change of the registry at a time, store first

    async def RegisterNode(self, request: head_pb2.RegisterNodeRequest,  # noqa: N802
                           context: aio.ServicerContext) -> head_pb2.RegisterNodeReply:
        return await self.head.register(request)

    async def Subscribe(self, requests: AsyncIterator[head_pb2.Heartbeat],  # noqa: N802
                        context: aio.ServicerContext) -> None:
        """Views and leases out, heartbeats in. A node's stream that closes is the node failing; a
        driver's stream marks it present while open (its objects are fetchable)."""
        queue = self.head.subscribe()
        member: tuple[int, int] | None = None
        driver = ""

        async def read() -> None:
            nonlocal member, driver
            async for beat in requests:
                await check_message(beat, context)
                seconds = 0.0  # every beat is answered: a member tells a stopped head from a quiet one
                if beat.slot >= 0:
                    if self.head.heartbeat(beat):
                        member = (beat.slot, beat.epoch)
                        seconds = self.head.lease_s
                elif beat.address:
                    if not driver:
                        driver = beat.address
                        self.head.drivers.joined(driver)
                    if beat.HasField("lineage"):
                        self.head.drivers.lineage[driver] = beat.lineage
                queue.put_nowait(head_pb2.HeadUpdate(lease=head_pb2.LeaseGrant(heartbeat=beat.seq, seconds=seconds)))

        reader = asyncio.ensure_future(read())
        try:
            while not reader.done():
                getter = asyncio.ensure_future(queue.get())
                await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    await context.write(getter.result())
                else:
                    getter.cancel()
            reader.result()
        finally:
            reader.cancel()
            self.head.unsubscribe(queue)
            if driver:
                self.head.drivers.left(driver)
            if member is not None:
                self.head.member_lost(*member)

    async def KillNode(self, request: head_pb2.KillNodeRequest,  # noqa: N802
                       context: aio.ServicerContext) -> head_pb2.KillNodeReply:
        return head_pb2.KillNodeReply(pid=self.head.kill(request.slot))

    async def NameActor(self, request: head_pb2.NamedActor,  # noqa: N802
                        context: aio.ServicerContext) -> head_pb2.NameActorReply:
        if not request.name or not request.actor_id:
            raise InvalidRequestError("NameActor needs a name and an actor id")
        async with self._names_changing:  # saved before anyone can learn who has the name
            if self.head.names.would_take(request):
                await self.head.state.name_taken(request)
            return head_pb2.NameActorReply(holder=self.head.names.take(request))

    async def GetActor(self, request: head_pb2.GetActorRequest,  # noqa: N802
                       context: aio.ServicerContext) -> head_pb2.GetActorReply:
        return head_pb2.GetActorReply(actor=self.head.names.find(request.name))

    async def ListActors(self, request: head_pb2.ListActorsRequest,  # noqa: N802
                         context: aio.ServicerContext) -> head_pb2.ListActorsReply:
        return head_pb2.ListActorsReply(actors=self.head.names.all())

    async def FreeActorNames(self, request: head_pb2.FreeActorNamesRequest,  # noqa: N802
                             context: aio.ServicerContext) -> head_pb2.FreeActorNamesReply:
        async with self._names_changing:
            await self.head.state.names_freed(request.actor_id, self.head.names.held_by(request.actor_id))
            return head_pb2.FreeActorNamesReply(names=self.head.names.free(request.actor_id))

    async def ClusterStats(self, request: head_pb2.ClusterStatsRequest,  # noqa: N802
                           context: aio.ServicerContext) -> head_pb2.ClusterStatsReply:
        return self.head.cluster_stats()

    async def Shutdown(self, request: head_pb2.ShutdownRequest,  # noqa: N802
                       context: aio.ServicerContext) -> head_pb2.ShutdownReply:
        await self.head.stop()
        return head_pb2.ShutdownReply()
