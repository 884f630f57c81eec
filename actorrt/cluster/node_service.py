"""The ``Node`` gRPC service: the peer stream and stats. Node processes and drivers both serve it."""

from __future__ import annotations

from grpc import aio

from actorrt.core import freezing
from actorrt.core.worker import Worker
from actorrt.rpc import node_pb2
from actorrt.util.usage import ProcessUsage


class NodeServicer:
    """The ``Node`` service of a node process (drivers serve it too, with no actors)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.slot = -1
        self.epoch = 0
        self.recoveries: list[node_pb2.RecoveryStats] = []
        self._usage = ProcessUsage()

    async def Connect(self, requests, context: aio.ServicerContext) -> None:  # noqa: N802
        await self.worker.router.serve(requests, context)

    async def FlushStash(  # noqa: N802
        self, request: node_pb2.FlushStashRequest, context: aio.ServicerContext
    ) -> node_pb2.FlushStashReply:
        written = await self.worker.ft.flush() if self.worker.ft is not None else 0
        host = self.worker.host
        ran = host.ran_from(set(request.senders)) if host is not None else []
        return node_pb2.FlushStashReply(written=written, ran=ran)

    async def Freeze(  # noqa: N802
        self, request: node_pb2.FreezeRequest, context: aio.ServicerContext
    ) -> node_pb2.FreezeReply:
        return freezing.freeze(self.worker, request.round)

    async def Stats(self, request: node_pb2.NodeStatsRequest, context: aio.ServicerContext) -> node_pb2.NodeStatsReply:  # noqa: N802
        return self.stats()

    def stats(self) -> node_pb2.NodeStatsReply:
        host = self.worker.host
        cpu_percent, rss_bytes = self._usage.sample()
        return node_pb2.NodeStatsReply(
            slot=self.slot,
            epoch=self.epoch,
            actors=host.stats() if host is not None else [],
            pending_results=self.worker.pending_results(),
            objects=len(self.worker.objects),
            shared_memory=self.worker.shared.stats(),
            messages_sent=self.worker.router.sent.messages,
            batches_sent=self.worker.router.sent.batches,
            lineage=self.worker.ft.stats() if self.worker.ft is not None else None,
            recoveries=self.recoveries,
            objects_kept=self.worker.retention.stats(),
            standby_copies=self.worker.standbys.loaded(),
            cpu_percent=cpu_percent,
            rss_bytes=rss_bytes,
        )
