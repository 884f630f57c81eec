"""The driver runtime: a Worker on a background uvloop thread, connected to a cluster.

Public API calls arrive on any thread; they hand work to the loop and wait on it, so notebooks and
Spark callbacks may call them concurrently.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import threading
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

import uvloop
from grpc import aio

from actorrt.cluster import leadership
from actorrt.cluster.head_client import HEAD_CALL_TIMEOUT_S, HeadClient
from actorrt.cluster.launch import HeadProcess
from actorrt.cluster.node_service import NodeServicer
from actorrt.core import values
from actorrt.core.object_ref import ObjectRef
from actorrt.core.task_spec import CHECKPOINT_METHOD
from actorrt.core.worker import Worker
from actorrt.exceptions import ClusterError
from actorrt.lineage import ids
from actorrt.lineage.checkpoints import write_manifest
from actorrt.net.auth import metadata
from actorrt.net.server import channel, start_server
from actorrt.net.tls import TlsFiles
from actorrt.rpc import head_pb2, node_pb2, node_pb2_grpc
from actorrt.store.opening import without_password

log = logging.getLogger(__name__)
T = TypeVar("T")

SHUTDOWN_FLUSH_TIMEOUT_S = 5.0
# At shutdown, what still runs on the driver's loop has this long to end once cancelled.
CANCEL_THE_REST_TIMEOUT_S = 2.0


def _node_dict(n: head_pb2.NodeInfo) -> dict[str, Any]:
    return {
        "node": n.slot, "epoch": n.epoch, "state": head_pb2.NodeState.Name(n.state), "address": n.address,
        "pid": n.pid, "hostname": n.hostname, "host_id": n.host_id, "managed": n.managed,
        "heir": n.heir if n.HasField("heir") else None,  # the live slot that inherited a dead one's actors
        "restarts": max(n.epoch - 1, 0) if n.managed else 0, "last_failure": n.last_failure,
    }


def _fields_dict(message: Any) -> dict[str, Any]:
    return {f.name: list(getattr(message, f.name)) if f.is_repeated else getattr(message, f.name)
            for f in message.DESCRIPTOR.fields}


def _ft_dict(ft: head_pb2.FaultTolerance) -> dict[str, Any]:
    return {"mode": ft.mode, "store_delay_ms": ft.store_delay_ms,
            "max_forwards": None if ft.max_forwards < 0 else ft.max_forwards}


# A call on the head raises HeadUnavailableError past its own bound: this one is never reached first.
_HEAD_CALL_S = HEAD_CALL_TIMEOUT_S + 10.0


class Driver:
    """What ``actorrt.core.context.current()`` is in a driver process."""

    def __init__(self, head_address: str, token: str, host: str, head_process: HeadProcess | None,
                 tls: TlsFiles | None = None) -> None:
        self.head_address = head_address
        self.token = token
        self.host = host
        self.head_process = head_process
        self.loop = uvloop.new_event_loop()
        self.worker = Worker(token, ids.driver_id(), self.loop, tls)
        self._thread = threading.Thread(target=self.loop.run_forever, name="actorrt-driver", daemon=True)
        self._server = None
        self._head: HeadClient | None = None
        self._follower: asyncio.Task | None = None

    def call(self, coro: Awaitable[T], timeout: float | None = None) -> T:
        """Run ``coro`` on the driver loop and wait for it (from any other thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self, wait_for_nodes: int, timeout: float) -> None:
        self._thread.start()
        try:
            self.call(self._start(wait_for_nodes, timeout))
        except BaseException:
            try:
                self.call(self._close(), timeout=10.0)
            finally:
                self._stop_loop()
            raise

    async def _start(self, wait_for_nodes: int, timeout: float) -> None:
        servicer = NodeServicer(self.worker)
        self._server, address = await start_server(
            self.host, 0, [(servicer, node_pb2.DESCRIPTOR.services_by_name["Node"])], self.token, self.worker.tls
        )
        self.worker.bind(address)
        await self.worker.serve_objects(self.host)
        self.worker.recovered.set()  # a driver is never rebuilt: it answers fetches at once
        self._head = HeadClient(self.head_address, self.token, self.worker.tls,
                                leadership.locator(lambda: self.worker.membership.view, self.worker.store_tls))
        # A unary call first: a wrong token then fails as UNAUTHENTICATED for sure, where a stream
        # aborted at once sometimes surfaced as INTERNAL on the client.
        await self._head.cluster_stats()
        first_view = self.loop.create_future()
        self._follower = asyncio.ensure_future(self._follow_head(first_view))
        try:
            await asyncio.wait_for(first_view, 10.0)
        except TimeoutError:
            raise ClusterError(f"no answer from the head at {self.head_address}") from None
        try:
            await self.worker.membership.wait(lambda m: len(m.alive_nodes()) >= wait_for_nodes, timeout)
        except TimeoutError:
            raise ClusterError(
                f"{wait_for_nodes} nodes did not come up within {timeout} s "
                f"(see the logs under {self.head_process.session.session_dir if self.head_process else 'the head'})"
            ) from None

    async def _follow_head(self, first_view: asyncio.Future) -> None:
        def beat() -> head_pb2.Heartbeat:  # with what its stash holds, for the dashboard
            ft = self.worker.ft
            lineage = ft.stats() if ft is not None and ft.logs_lineage else None
            return head_pb2.Heartbeat(slot=-1, address=self.worker.address, lineage=lineage)

        follow = asyncio.ensure_future(self._head.follow(self.worker.apply_view, beat, first_view))
        watch = asyncio.ensure_future(self._watch_supervisor())
        try:
            await asyncio.wait({follow, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            follow.cancel()
            watch.cancel()
        why = follow.result() if follow.done() and not follow.cancelled() else watch.result()
        if first_view.done() and not first_view.cancelled() and first_view.exception() is None:
            reason = (f"the head at {self.head_address} is gone ({why}): this driver's cluster is lost; call "
                      f"actorrt.shutdown(), then actorrt.init() for a new one")
            log.error("%s", reason)
            self.worker.lose_cluster(reason)

    async def _watch_supervisor(self) -> str:
        """An embedded cluster's supervisor is this process's child: once it has exited, the head
        will not come back, and nothing is gained by waiting out the head grace."""
        if self.head_process is None:
            await asyncio.Event().wait()  # a cluster joined by address: only its head says
        while (code := self.head_process.process.poll()) is None:
            await asyncio.sleep(0.2)
        return f"its supervisor (pid {self.head_process.process.pid}) exited with {code}"

    # ---- API calls ----------------------------------------------------------------------------

    def get(self, refs: ObjectRef | Sequence[ObjectRef], timeout: float | None) -> Any:
        return values.get(self.worker, refs, timeout)

    def head_reachable(self) -> None:
        self.call(self._head.reachable(), timeout=_HEAD_CALL_S)

    def name_actor(self, actor: head_pb2.NamedActor) -> head_pb2.NamedActor:
        return self.call(self._head.name_actor(actor), timeout=_HEAD_CALL_S)

    def free_actor_names(self, actor_id: bytes) -> None:
        self.call(self._head.free_actor_names(actor_id), timeout=_HEAD_CALL_S)

    def find_actor(self, name: str) -> head_pb2.NamedActor | None:
        return self.call(self._head.get_actor(name), timeout=_HEAD_CALL_S)

    def get_actor(self, name: str) -> head_pb2.NamedActor:
        found = self.find_actor(name)
        if found is None:
            raise ValueError(f"no actor is named {name!r} in the cluster at {self.head_address}")
        return found

    def wait(self, refs: Sequence[ObjectRef], num_returns: int,
             timeout: float | None) -> tuple[list[ObjectRef], list[ObjectRef]]:
        return values.wait(self.worker, refs, num_returns, timeout)

    def checkpoint(self, actors: Sequence[tuple[bytes, int]], timeout: float | None) -> dict[str, Any]:
        """Checkpoint ``actors`` (their ids and slots) with one barrier task each; returns the manifest."""
        submit = self.worker.submitter.submit_task
        refs = [submit(actor_id, slot, CHECKPOINT_METHOD, (), {}) for actor_id, slot in actors]
        taken = values.get(self.worker, refs, timeout)
        return write_manifest(self.worker.membership.view.fault_tolerance.checkpoint_dir, taken)

    def rollbacks(self) -> int:
        return self.worker.membership.view.rollbacks

    def kill_node(self, slot: int) -> int:
        info = self.worker.membership.node(slot)
        if info is None:
            raise ValueError(f"no node {slot}; nodes are {sorted(n['node'] for n in self.nodes())}")
        pid = self.call(self._head.kill_node(slot), timeout=_HEAD_CALL_S)
        self.call(self.worker.membership.wait(lambda m: not m.incarnation_alive(slot, info.epoch), 10.0))
        return pid

    def nodes(self) -> list[dict[str, Any]]:
        return [_node_dict(n) for n in self.worker.membership.view.nodes]

    def stats(self) -> dict[str, Any]:
        """Asks every live node for a fresh snapshot (actors, queue sizes)."""
        alive = self.worker.membership.alive_nodes()
        per_node = dict(zip([n.slot for n in alive], self.call(self._node_stats(alive), timeout=30.0), strict=True))
        nodes = []
        for info in self.worker.membership.view.nodes:
            entry = _node_dict(info)
            s = per_node.get(info.slot)
            actors = [] if s is None else [
                {"actor_id": a.actor_id.hex(), "class": a.class_name, "queued": a.queued,
                 "executed": a.executed, "dead": a.dead, "results_kept_bytes": a.results_kept_bytes,
                 "standby": a.standby if a.HasField("standby") else None, "label": a.label}
                for a in s.actors
            ]
            entry.update(
                num_actors=len(actors), queued=sum(a["queued"] for a in actors), actors=actors,
                pending_results=s.pending_results if s else 0, objects=s.objects if s else 0,
                messages_sent=s.messages_sent if s else 0, batches_sent=s.batches_sent if s else 0,
                lineage=_fields_dict(s.lineage) if s else {},
                recoveries=[_fields_dict(r) for r in s.recoveries] if s else [],
                objects_kept=_fields_dict(s.objects_kept) if s else {},
                shared_memory=_fields_dict(s.shared_memory) if s else {},
                standby_copies=dict(s.standby_copies) if s else {},
            )
            nodes.append(entry)
        return {
            "head": self.head_address,
            "nodes": nodes,
            "store_shards": [{"address": s.address, "pid": s.pid, "restarts": s.restarts, "replicas": list(s.replicas),
                              "failovers": s.failovers} for s in self.worker.membership.view.store_shards],
            "store_replicas": self.worker.membership.view.store_replicas,
            "store_url": without_password(self.worker.membership.view.store_url),
            "fault_tolerance": _ft_dict(self.worker.membership.view.fault_tolerance),
            # actors their standbys serve now: actor ID -> the slot that serves it
            "moved_actors": {m.actor.hex(): m.slot for m in self.worker.membership.view.moved_actors},
            "driver": {"pending_results": self.worker.pending_results(), "objects": len(self.worker.objects),
                       "objects_kept": _fields_dict(self.call(self._objects_kept(), timeout=10.0)),
                       "shared_memory": _fields_dict(self.worker.shared.stats()),
                       "lineage": _fields_dict(self.worker.ft.stats()) if self.worker.ft else {}},
        }

    async def _objects_kept(self) -> node_pb2.ObjectsKept:
        return self.worker.retention.stats()  # read on the loop, which changes it

    async def _node_stats(self, nodes: list[head_pb2.NodeInfo]) -> list[node_pb2.NodeStatsReply | None]:
        async def one(info: head_pb2.NodeInfo) -> node_pb2.NodeStatsReply | None:
            try:
                async with channel(info.address, self.worker.tls) as chan:
                    stub = node_pb2_grpc.NodeStub(chan)
                    return await stub.Stats(node_pb2.NodeStatsRequest(), metadata=metadata(self.token), timeout=5.0)
            except aio.AioRpcError:
                return None  # died meanwhile; the view will say so

        return await asyncio.gather(*(one(n) for n in nodes))

    # ---- shutdown -----------------------------------------------------------------------------

    def shutdown(self) -> None:
        if self.head_process is None and self.worker.ft is not None:
            # The cluster goes on: write what only this driver's stash holds (the processes it sent
            # tasks to wait for its notice that they are committed before they let them go).
            try:
                self.call(self.worker.ft.flush(), timeout=SHUTDOWN_FLUSH_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - a store or loop gone: shut down all the same
                log.warning("could not flush the lineage stash at shutdown: %r", exc)
        if self._follower is not None:
            self.loop.call_soon_threadsafe(self._follower.cancel)
        if self.head_process is not None:
            if self.head_process.process.poll() is None:  # its supervisor runs (a head to ask)
                try:
                    self.call(self._head.shutdown(), timeout=30.0)
                except Exception as exc:  # noqa: BLE001 - the head may be gone already
                    log.warning("head shutdown failed: %s; stopping its supervisor", exc)
                    self.head_process.process.terminate()
            self.head_process.wait_stopped()
            shutil.rmtree(self.head_process.session.session_dir, ignore_errors=True)
        try:
            self.call(self._close(), timeout=10.0)
        finally:
            self._stop_loop()

    async def _close(self) -> None:
        if self._follower is not None:
            self._follower.cancel()
        self.worker.fail_all("actorrt was shut down")
        await self.worker.aclose()
        if self._head is not None:
            await self._head.aclose()
        if self._server is not None:
            await self._server.stop(0.2)
        await _cancel_the_rest()

    def _stop_loop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10.0)
        if not self._thread.is_alive():
            self.loop.close()


async def _cancel_the_rest() -> None:
    """Cancel what still runs on the loop and let it end, as ``asyncio.run`` does: a task still
    pending when the loop stops is destroyed at exit with "Task was destroyed but it is pending!"."""
    rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in rest:
        task.cancel()
    if rest:
        await asyncio.wait(rest, timeout=CANCEL_THE_REST_TIMEOUT_S)
