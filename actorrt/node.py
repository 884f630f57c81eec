"""A node process: a gRPC server on uvloop hosting many actors; the unit of fail-stop failure.

Run as ``python -m actorrt.node --head HOST:PORT [--slot N] [--host H]`` with the cluster token in
``ACTORRT_TOKEN``. The node registers with the head, keeps a heartbeat stream to it, and exits when
the head is gone for good.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket

import uvloop

from actorrt import ids, runtime
from actorrt.actor_host import ActorHost
from actorrt.exceptions import ActorRTError
from actorrt.head_client import HEAD_LOSS_GRACE_S, HeadClient
from actorrt.node_service import NodeServicer
from actorrt.processes import daemon_setup
from actorrt.rpc import head_pb2, node_pb2
from actorrt.task_spec import SenderContext
from actorrt.transport import start_server
from actorrt.worker import Worker

log = logging.getLogger("actorrt.node")



class NodeProcess:
    """The runtime of a node process (what ``actorrt.runtime.current()`` returns there)."""

    def __init__(self, head_address: str, token: str, slot: int, host: str) -> None:
        self.head_address = head_address
        self.token = token
        self.requested_slot = slot
        self.bind_host = host
        self.worker = Worker(token, ids.driver_id(), asyncio.get_running_loop())
        self.worker.host = ActorHost(self.worker)
        self.servicer = NodeServicer(self.worker)
        self.head = HeadClient(head_address, token)

    def get(self, refs, timeout=None):
        raise ActorRTError("actorrt.get() cannot block inside an actor; use `await ref` in an async method")

    async def run(self) -> None:
        server, address = await start_server(
            self.bind_host, 0, [(self.servicer, node_pb2.DESCRIPTOR.services_by_name["Node"])], self.token
        )
        self.worker.bind(address)
        runtime.set_current(self)
        self._main_task = asyncio.current_task()
        reply = await self.head.register(self.requested_slot, address, os.getpid(), socket.gethostname())
        self.servicer.slot, self.servicer.epoch = reply.slot, reply.epoch
        self.worker.apply_view(reply.view)
        # Tasks submitted outside any actor task come from the node itself.
        self.worker.process_context = SenderContext(ids.actor_id(f"node-{reply.slot}".encode(), reply.epoch))
        log.info("node %d (epoch %d) serving on %s", reply.slot, reply.epoch, address)
        try:
            await self._follow_head()
        finally:
            self.worker.host.stop()
            await self.worker.aclose()
            await server.stop(0.5)

    async def _follow_head(self) -> None:
        why = await self.head.follow(self._apply_view, self._heartbeat, HEAD_LOSS_GRACE_S)
        log.error("%s; exiting", why)

    def _apply_view(self, view: head_pb2.ClusterView) -> None:
        self.worker.apply_view(view)
        me = self.worker.node(self.servicer.slot)
        if me is None or me.epoch != self.servicer.epoch or me.state != head_pb2.ALIVE:
            # Fail-stop: the cluster has declared this incarnation dead and told its callers so;
            # running their tasks any further would contradict that.
            log.error("the head declared node %d (epoch %d) dead; exiting", self.servicer.slot, self.servicer.epoch)
            asyncio.get_running_loop().call_soon(self._main_task.cancel)

    def _heartbeat(self) -> head_pb2.Heartbeat:
        return head_pb2.Heartbeat(slot=self.servicer.slot, epoch=self.servicer.epoch, stats=self.servicer.stats())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="actorrt.node")
    parser.add_argument("--head", required=True, help="head address host:port")
    parser.add_argument("--slot", type=int, default=-1, help="slot to take (-1: any free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    args = parser.parse_args(argv)
    token = daemon_setup("actorrt.node")

    async def amain() -> None:
        node = NodeProcess(args.head, token, args.slot, args.host)
        task = asyncio.current_task()
        for sig in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(sig, task.cancel)
        try:
            await node.run()
        except asyncio.CancelledError:
            pass

    uvloop.run(amain())


if __name__ == "__main__":
    main()
