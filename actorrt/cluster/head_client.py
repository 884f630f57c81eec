"""Talking to the head: registration, the heartbeat/view stream, admin calls."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import NoReturn

import grpc
from grpc import aio

from actorrt.cluster.head_options import HEAD_GRACE_S
from actorrt.exceptions import ClusterError, HeadUnavailableError
from actorrt.net.auth import metadata
from actorrt.net.server import channel
from actorrt.net.tls import CA_ENV, CERT_ENV, KEY_ENV, TlsFiles
from actorrt.rpc import head_pb2, head_pb2_grpc

log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL_S = 0.2
# The head answers every heartbeat: a stream silent this long is a head that stopped (a paused
# machine), not one that is busy. It is dropped only if another head serves the cluster now (the
# store's lease says so): the head takes a stream that closes for a node's failure, and one only
# paused must not find its nodes gone when it wakes (its supervisor replaces a hung head anyway).
HEAD_SILENT_S = 5.0
# A call that needs the head waits this long for one that is unreachable (restarting) to answer.
HEAD_CALL_TIMEOUT_S = 30.0


class OtherClusterError(ClusterError):
    """The head answering at a known address serves another cluster than the one this process joined."""


class ClusterStoppedError(ClusterError):
    """The head said the cluster is being stopped."""


# Where the active head serves now, read from the store (None: unknown; see leadership.py).
Locate = Callable[[], Awaitable[str | None]]


class HeadClient:
    def __init__(self, address: str, token: str, tls: TlsFiles | None = None, locate: Locate | None = None) -> None:
        self.address = address
        self._metadata = metadata(token)
        self._tls = tls
        self.locate = locate  # asked where the active head is, while this one is unreachable
        self._channel = channel(address, tls)
        # A head in TLS closes a plaintext connection at once: UNAVAILABLE, as if it were down.
        self._unavailable_hint = "" if tls else (f" (if the cluster runs in mutual TLS: set {CERT_ENV}, {KEY_ENV} "
                                                 f"and {CA_ENV}, or pass the --tls-* options of `actorrt`)")
        self._stub = head_pb2_grpc.HeadStub(self._channel)
        self.cluster_id = b""  # of the first view: the cluster this process joined
        self.grace_s = HEAD_GRACE_S  # how long to wait for an unreachable head (the view says)

    def _joined(self, view: head_pb2.ClusterView) -> None:
        self.grace_s = view.head_grace_s or HEAD_GRACE_S
        if not self.cluster_id:
            self.cluster_id = view.cluster_id
        elif view.cluster_id != self.cluster_id:
            raise OtherClusterError(
                f"the head at {self.address} serves another cluster (id {view.cluster_id.hex()}) than the one this "
                f"process joined (id {self.cluster_id.hex()}): that head started afresh, without this cluster's "
                f"state, or another cluster took its address; this process does not join it")

    async def _unary(self, name: str, request: object, timeout: float | None = None) -> object:
        """Call ``name``. Once this process has joined the cluster, a head that does not answer is
        one restarting: the call waits for it up to ``timeout`` (``HEAD_CALL_TIMEOUT_S``), then
        raises HeadUnavailableError."""
        timeout = timeout or HEAD_CALL_TIMEOUT_S
        joined = bool(self.cluster_id)
        deadline = asyncio.get_running_loop().time() + (timeout if joined else min(timeout, 10.0))
        while True:
            stub = self._stub
            try:
                return await getattr(stub, name)(request, metadata=self._metadata, wait_for_ready=joined,
                                                 timeout=max(deadline - asyncio.get_running_loop().time(), 0.01))
            except (aio.AioRpcError, asyncio.CancelledError) as exc:
                # The active head moved while it waited (a standby took over; closing the channel
                # to the former one cancelled the call, not this task): ask that one.
                moved = stub is not self._stub and not asyncio.current_task().cancelling()
                if moved and asyncio.get_running_loop().time() < deadline:
                    continue
                if isinstance(exc, asyncio.CancelledError):
                    raise
                self._refused(name, timeout, joined, exc)

    def _refused(self, name: str, timeout: float, joined: bool, exc: aio.AioRpcError) -> NoReturn:
        """Raise what a failed call means."""
        if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
            raise ClusterError(f"the head at {self.address} rejected the cluster token") from None
        if joined and exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            raise HeadUnavailableError(f"the head at {self.address} did not answer {name} within {timeout:g} s "
                                       f"({exc.code().name}): it is down or restarting; try again") from None
        if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
            raise ClusterError(f"{self.address} is not an actorrt head: a process there answers, but not as the head "
                               f"(a node's address? the head's is in `actorrt status` on its machine, and in its "
                               f"session file)") from None
        hint = self._unavailable_hint if exc.code() == grpc.StatusCode.UNAVAILABLE else ""
        raise ClusterError(f"head {self.address}: {name} failed: {exc.code().name}: {exc.details()}"
                           f"{hint}") from None

    async def reachable(self) -> None:
        """Return once the channel to the head is up; HeadUnavailableError after HEAD_CALL_TIMEOUT_S."""
        try:
            await asyncio.wait_for(self._channel.channel_ready(), HEAD_CALL_TIMEOUT_S)
        except TimeoutError:
            raise HeadUnavailableError(f"the head at {self.address} did not answer within {HEAD_CALL_TIMEOUT_S:g} s: "
                                       f"it is down or restarting; try again") from None

    async def register(self, slot: int, address: str, pid: int, hostname: str,
                       host_id: str) -> head_pb2.RegisterNodeReply:
        req = head_pb2.RegisterNodeRequest(slot=slot, address=address, pid=pid, hostname=hostname, host_id=host_id)
        reply = await self._unary("RegisterNode", req)
        self._joined(reply.view)
        return reply

    async def kill_node(self, slot: int) -> int:
        reply = await self._unary("KillNode", head_pb2.KillNodeRequest(slot=slot))
        return reply.pid

    async def name_actor(self, actor: head_pb2.NamedActor) -> head_pb2.NamedActor:
        """Take ``actor.name`` for ``actor``; returns the actor that has the name."""
        return (await self._unary("NameActor", actor)).holder

    async def get_actor(self, name: str) -> head_pb2.NamedActor | None:
        reply = await self._unary("GetActor", head_pb2.GetActorRequest(name=name))
        return reply.actor if reply.HasField("actor") else None

    async def list_actors(self) -> list[head_pb2.NamedActor]:
        return list((await self._unary("ListActors", head_pb2.ListActorsRequest())).actors)

    async def free_actor_names(self, actor_id: bytes) -> list[str]:
        return list((await self._unary("FreeActorNames", head_pb2.FreeActorNamesRequest(actor_id=actor_id))).names)

    async def cluster_stats(self) -> head_pb2.ClusterStatsReply:
        return await self._unary("ClusterStats", head_pb2.ClusterStatsRequest())

    async def shutdown(self) -> None:
        await self._unary("Shutdown", head_pb2.ShutdownRequest(), timeout=10.0)

    async def subscribe(
        self,
        on_view: Callable[[head_pb2.ClusterView], None],
        heartbeat: Callable[[], head_pb2.Heartbeat],
        first_view: asyncio.Future | None = None,
        on_lease: Callable[[head_pb2.LeaseGrant], None] = lambda grant: None,
        on_deadlock: Callable[[head_pb2.Deadlock], None] = lambda deadlock: None,
    ) -> None:
        """Send heartbeats and apply views and leases until the stream ends; raises ClusterError then."""

        async def beats():
            while True:
                yield heartbeat()
                await asyncio.sleep(HEARTBEAT_INTERVAL_S)

        call = self._stub.Subscribe(beats(), metadata=self._metadata)
        loop = asyncio.get_running_loop()
        heard = [loop.time()]
        replaced: list[str] = []  # the head that serves instead of a silent one

        async def watch_silence() -> None:
            while True:
                await asyncio.sleep(1.0)
                if loop.time() - heard[0] >= HEAD_SILENT_S and (found := await self._active_elsewhere()):
                    replaced.append(found)
                    call.cancel()
                    return

        watchdog = asyncio.ensure_future(watch_silence()) if self.locate is not None else None
        try:
            async for update in call:
                heard[0] = loop.time()
                if update.HasField("lease"):
                    on_lease(update.lease)
                    continue
                if update.HasField("deadlock"):
                    on_deadlock(update.deadlock)
                    continue
                self._joined(update.view)
                on_view(update.view)
                if first_view is not None and not first_view.done():
                    first_view.set_result(update.view)
                if update.view.stopping:
                    raise ClusterStoppedError(f"the cluster of the head at {self.address} was stopped")
        except (aio.AioRpcError, asyncio.CancelledError) as exc:
            if replaced:
                raise ClusterError(f"the head at {self.address} said nothing for {HEAD_SILENT_S:g} s, and the head "
                                   f"at {replaced[0]} serves the cluster now") from None
            if isinstance(exc, asyncio.CancelledError):
                raise
            if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
                raise ClusterError(f"the head at {self.address} rejected the cluster token") from None
            raise ClusterError(f"lost the head at {self.address}: {exc.code().name}") from None
        finally:
            if watchdog is not None:
                watchdog.cancel()
            call.cancel()
        raise ClusterError(f"the head at {self.address} closed the stream")

    async def follow(
        self,
        on_view: Callable[[head_pb2.ClusterView], None],
        heartbeat: Callable[[], head_pb2.Heartbeat],
        first_view: asyncio.Future | None = None,
        on_lease: Callable[[head_pb2.LeaseGrant], None] = lambda grant: None,
        on_deadlock: Callable[[head_pb2.Deadlock], None] = lambda deadlock: None,
    ) -> str:
        """Keep the heartbeat/view stream up, reconnecting; return why once the head has been
        unreachable for the grace its views give, or the cluster stops. A failure before the first
        view goes to ``first_view``."""
        loop = asyncio.get_running_loop()
        lost_since: float | None = None

        def seen(view: head_pb2.ClusterView) -> None:
            nonlocal lost_since
            lost_since = None
            on_view(view)

        while True:
            try:
                await self.subscribe(seen, heartbeat, first_view, on_lease, on_deadlock)
            except (OtherClusterError, ClusterStoppedError) as exc:  # waiting longer changes nothing
                if first_view is not None and not first_view.done():
                    first_view.set_exception(exc)
                return str(exc)
            except ClusterError as exc:
                if first_view is not None and not first_view.done():
                    first_view.set_exception(exc)
                    return str(exc)
                now = loop.time()
                if lost_since is None:  # one line per loss, not one per attempt
                    lost_since = now
                    log.warning("%s; reconnecting for up to %.0f s", exc, self.grace_s)
                if now - lost_since >= self.grace_s:
                    return f"{exc}; unreachable for {now - lost_since:.1f} s"
                log.debug("%s; reconnecting", exc)
                await self._follow_the_lease()
            await asyncio.sleep(0.25)

    async def _active_elsewhere(self) -> str | None:
        """The address of the active head if the store names another than this one's."""
        if self.locate is None:
            return None
        try:
            found = await self.locate()
        except ClusterError as exc:
            log.debug("could not read where the active head is: %s", exc)
            return None
        return found if found and found != self.address else None

    async def _follow_the_lease(self) -> None:
        """Move to where the store says the active head serves now, if that is elsewhere (a
        standby took the cluster over)."""
        if found := await self._active_elsewhere():
            log.warning("the active head is now at %s (was %s)", found, self.address)
            old, self.address = self._channel, found
            self._channel = channel(found, self._tls)
            self._stub = head_pb2_grpc.HeadStub(self._channel)
            await old.close()

    async def aclose(self) -> None:
        await self._channel.close()

