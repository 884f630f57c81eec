"""The dashboard's HTTP server: aiohttp on the head's own event loop.

It samples the head's stats once a second into its history (no page open: that is all it does).
While pages are open it also asks the store shards for their ``INFO``, builds one snapshot of
every page, and sends it to each open page as a server-sent event: the cost does not grow with
the cluster's traffic, only with its size. ``bench/dashboard_cost.py`` measures it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import ssl
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web
from yarl import URL

from actorrt.dashboard import pages
from actorrt.dashboard.auth import Door
from actorrt.dashboard.history import SAMPLE_EVERY_S, History
from actorrt.dashboard.recoveries import FailureLog
from actorrt.exceptions import ClusterError
from actorrt.lineage import checkpoints, ids
from actorrt.net.tls import TlsFiles
from actorrt.rpc import head_pb2
from actorrt.util.background import BackgroundTasks
from actorrt.util.usage import ProcessUsage

log = logging.getLogger("actorrt.head")

STATIC = Path(__file__).parent / "static"
SHARD_INFO_TIMEOUT_S = 0.5
# A failing sample is logged at most this often (it would fail again every second).
FAILURE_LOGGED_EVERY_S = 60.0
# A stopping head waits this long at most for requests under way (event streams end at once).
SHUTDOWN_TIMEOUT_S = 1.0
# Security headers of every answer: the page runs only its own scripts and is never framed.
_HEADERS = {"Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:",
            "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-store"}


@dataclass
class HeadSources:
    """What the dashboard reads of the head."""

    stats: Callable[[], head_pb2.ClusterStatsReply]
    shard_info: Callable[[], Awaitable[dict[str, dict | BaseException]]]  # each store shard's INFO, by address
    heartbeat_ages: Callable[[], dict[int, float]]  # seconds since each live node's last heartbeat
    failures: FailureLog
    checkpoint_dir: str


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: only "localhost" is known to stay on this machine
        return False


class Dashboard:
    def __init__(self, sources: HeadSources, token: str, tls: TlsFiles | None = None) -> None:
        self.sources = sources
        self.history = History(sources.failures)
        self._token = token
        self._tls = tls
        self._door: Door | None = None  # once it knows its port and scheme
        self._listeners: set[asyncio.Queue[bytes | None]] = set()  # open event streams (None: end)
        self._usage = ProcessUsage()  # the head's own
        self._head_usage = (0.0, 0)  # its last sample: (CPU percent, resident bytes)
        self._shards: dict[str, dict | str] = {}  # each shard's INFO, or why it has none
        self._shards_at = 0.0  # when they were read (loop time)
        self._failure_logged_at = -FAILURE_LOGGED_EVERY_S
        self._background = BackgroundTasks("dashboard")
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self, host: str, port: int) -> str:
        """Serve on ``host:port`` (0: any free port); returns the address to open. HTTPS with the
        cluster's certificate when the cluster speaks TLS and ``host`` is not loopback."""
        app = web.Application(middlewares=[self._guard])
        app.router.add_get("/", self._index)
        app.router.add_get("/login", self._login_page)
        app.router.add_post("/login", self._log_in)
        app.router.add_get("/api/snapshot", self._snapshot)
        app.router.add_get("/api/events", self._events)
        app.router.add_get("/api/actors/{actor_id}", self._actor)
        app.router.add_static("/static/", STATIC, follow_symlinks=False)
        # handler_cancellation: an event stream whose page closed ends at once, not at its next write.
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, handler_cancellation=True,
                                     shutdown_timeout=SHUTDOWN_TIMEOUT_S)
        await self._runner.setup()
        context = None
        if self._tls is not None and not is_loopback(host):
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(self._tls.cert, self._tls.key)
        site = web.TCPSite(self._runner, host, port, ssl_context=context)
        await site.start()
        bound = site._server.sockets[0].getsockname()[1]  # aiohttp names no public accessor for it
        self._door = Door(self._token, bound, secure=context is not None)
        shown = f"[{host}]" if ":" in host else host
        self.url = f"{'https' if context else 'http'}://{shown}:{bound}/"
        if not is_loopback(host):
            log.warning("the dashboard serves beyond this machine on %s (%s)", self.url,
                        "HTTPS" if context else "plain HTTP: the cluster has no TLS; anyone on the path sees the token")
        self._background.spawn(self._sample())
        return self.url

    async def stop(self) -> None:
        self._background.cancel_all()
        self._send(None)
        if self._runner is not None:
            await self._runner.cleanup()

    # ---- sampling -------------------------------------------------------------------------------

    async def _sample(self) -> None:
        while True:
            await asyncio.sleep(SAMPLE_EVERY_S)
            try:
                stats = self.sources.stats()
                self._head_usage = self._usage.sample()
                self.history.sample(time.time(), stats)
                if self._listeners:
                    await self._read_shards(stats)
                    self._send(self._encoded(stats))
            except Exception:  # noqa: BLE001 - a page that stops updating is better than a head that stops
                now = asyncio.get_running_loop().time()
                if now - self._failure_logged_at >= FAILURE_LOGGED_EVERY_S:
                    self._failure_logged_at = now
                    log.exception("the dashboard's sample failed (logged once a minute at most)")

    def _send(self, data: bytes | None) -> None:
        for queue in self._listeners:
            with contextlib.suppress(asyncio.QueueEmpty):
                queue.get_nowait()  # a page that fell behind gets the newest only
            queue.put_nowait(data)

    async def _read_shards(self, stats: head_pb2.ClusterStatsReply) -> None:
        """Each of the head's own shards' INFO (an external store's are its operators' to watch)."""
        self._shards_at = asyncio.get_running_loop().time()
        if not stats.view.store_shards:
            return
        try:
            infos = await asyncio.wait_for(self.sources.shard_info(), SHARD_INFO_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - a shard down is what the page must show, not a crash
            infos = {s.address: exc for s in stats.view.store_shards}
        self._shards = {address: f"unreachable: {info!r}" if isinstance(info, BaseException) else info
                        for address, info in infos.items()}

    async def _fresh_shards(self, stats: head_pb2.ClusterStatsReply) -> None:
        if asyncio.get_running_loop().time() - self._shards_at > SAMPLE_EVERY_S:
            await self._read_shards(stats)

    def _encoded(self, stats: head_pb2.ClusterStatsReply) -> bytes:
        cpu, rss = self._head_usage
        head = {"cpu_percent": cpu, "rss_bytes": rss, "heartbeats": self.sources.heartbeat_ages()}
        snapshot = pages.snapshot(stats, self.history, head, self._shards, time.time())
        # Not a number is no JSON: one would stop every page (what actors publish is filtered).
        return json.dumps(snapshot, separators=(",", ":"), allow_nan=False).encode()

    # ---- requests -------------------------------------------------------------------------------

    @web.middleware
    async def _guard(self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                     ) -> web.StreamResponse:
        response = await self._guarded(request, handler)
        if not response.prepared:  # (an event stream has sent its headers already)
            response.headers.update(_HEADERS)
        return response

    async def _guarded(self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                       ) -> web.StreamResponse:
        given = request.query.get("token")
        if given is not None:  # a link with the token: log in, and drop the token from the address
            if not self._door.is_token(given):
                return _login(401, "That token is not this cluster's.")
            kept = {k: v for k, v in request.query.items() if k != "token"}
            # Always a path of this server ("//host/..." would send the browser elsewhere).
            here = URL("/" + request.rel_url.path.lstrip("/\\")).with_query(kept)
            return self._door.admit(_see_other(str(here)))
        if request.path == "/login" or request.path.startswith("/static/"):  # the page's code: no data
            return await handler(request)
        if not self._door.lets_in(request):
            if request.path.startswith("/api/"):
                return web.json_response({"error": "log in with the cluster token first"}, status=401)
            return _login(401, "")
        return await handler(request)

    async def _login_page(self, request: web.Request) -> web.StreamResponse:
        return _login(200, "")

    async def _log_in(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        token = form.get("token", "")
        if not isinstance(token, str) or not self._door.is_token(token.strip()):
            return _login(401, "That token is not this cluster's.")
        return self._door.admit(_see_other("/"))

    async def _index(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC / "index.html")

    async def _snapshot(self, request: web.Request) -> web.StreamResponse:
        stats = self.sources.stats()
        await self._fresh_shards(stats)
        return web.Response(body=self._encoded(stats), content_type="application/json")

    async def _events(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", **_HEADERS})
        await response.prepare(request)
        queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=1)
        self._listeners.add(queue)
        try:
            stats = self.sources.stats()
            await self._fresh_shards(stats)
            data: bytes | None = self._encoded(stats)  # at once: a page opened shows it without waiting a tick
            while data is not None:
                await response.write(b"data: " + data + b"\n\n")
                data = await queue.get()
        except ConnectionResetError:  # the page went away
            pass
        finally:
            self._listeners.discard(queue)
        return response

    async def _actor(self, request: web.Request) -> web.StreamResponse:
        try:
            actor_id = bytes.fromhex(request.match_info["actor_id"])
        except ValueError:
            return web.json_response({"error": "an actor ID is hexadecimal"}, status=400)
        stats = self.sources.stats()
        found = next(((n, a) for n in stats.nodes for a in n.actors
                      if a.actor_id == actor_id and actor_id != ids.FUNCTIONS), None)
        if found is None:
            return web.json_response({"error": f"no live actor {actor_id.hex()}"}, status=404)
        node, stats_of_actor = found
        actor = pages.actor_row(node, stats_of_actor, pages.names_of(stats), self.history)
        files = await asyncio.to_thread(checkpoints.checkpoint_files, self.sources.checkpoint_dir, actor_id)
        last = next((f for f in reversed(self.sources.failures.failures) if f.slot == node.slot), None)
        return web.json_response({**actor, "checkpoints": files,
                                  "last_recovery": last.as_json() if last is not None else None})


async def serve_dashboard(sources: HeadSources, token: str, tls: TlsFiles | None, host: str, port: int,
                          restarted: bool = False, former_url: str = "") -> Dashboard | None:
    """The head's dashboard, serving; on a first start, ClusterError if it cannot. A ``restarted``
    head serves it where its predecessor did (``former_url``), so open pages reconnect, and goes on
    without it (None) rather than fail a running cluster for it."""
    dashboard = Dashboard(sources, token, tls)
    port = urllib.parse.urlsplit(former_url).port or port
    try:
        await dashboard.start(host, port)
    except OSError as exc:
        message = f"the dashboard cannot serve on {host}:{port}: {exc.strerror or exc}"
        await dashboard.stop()
        if not restarted:
            raise ClusterError(message) from None
        log.error("%s; the cluster goes on without it", message)
        return None
    log.info("dashboard on %s", dashboard.url)
    return dashboard


_LOGIN_PAGE = (STATIC / "login.html").read_text()


def _login(status: int, error: str) -> web.Response:
    return web.Response(status=status, text=_LOGIN_PAGE.replace("{{error}}", error), content_type="text/html")


def _see_other(location: str) -> web.Response:
    return web.Response(status=303, headers={"Location": location})
