"""The supervisor: the root process of a cluster's head. It runs the head, restarts it when it
dies, and starts for it the processes that must outlive a head (nodes, store shards).

Run as ``python -m actorrt.cluster.supervisor [--parent-pid P] -- HEAD COMMAND...`` (``actorrt
start --head`` and ``actorrt.init()`` do). The head and every process it asks for are this
process's children and die with it (the parent-death signal), so stopping or killing the
supervisor still leaves nothing behind. A head that dies is started again with ``--restarted``:
it rebuilds its state from the store and adopts the nodes and shards that kept running. The head
talks to the supervisor over a socket pair (``children.py`` is its side): a request to start a
process (its stdin descriptor passed along), and a notice once it serves. A head that exits 0
stopped the cluster on purpose, and the supervisor exits with it; so does a first head that
exits before it serves (its error is in the head's log, for the launcher to show), a head that
found another head had replaced it, and a restarted one that keeps failing before it serves.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import sys
from pathlib import Path

import click

from actorrt.util.background import BackgroundTasks
from actorrt.util.children import MAX_REQUEST_BYTES, SUPERVISOR_FD_ENV
from actorrt.util.processes import dying_with_us, spawn
from actorrt.util.ticks import ticks

log = logging.getLogger("actorrt.supervisor")

# A head that dies soon after it started is restarted after a pause that doubles up to the last
# one (a head that cannot start, e.g. its store is gone for now, must not be relaunched in a tight
# loop); one that served for a while is restarted at once.
RESTART_PAUSES_S = (0.0, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
STABLE_AFTER_S = 10.0
# A serving head says it runs every ALIVE_EVERY_S; one silent for HUNG_AFTER_S (stopped, or its
# loop stuck) is killed and restarted: there is never a second head beside a hung one.
ALIVE_EVERY_S = 0.5
HUNG_AFTER_S = 5.0
# Restarted heads that die before they serve, in a row, before the supervisor gives up: what
# keeps them from starting (the store's state gone, the port taken) will not go away by itself.
MAX_FAILED_STARTS = 10
# The exit code of a head that found another head had replaced it: not restarted.
SUPERSEDED_EXIT = 3


class Supervisor:
    def __init__(self, head_argv: list[str], parent_pid: int | None) -> None:
        self.head_argv = head_argv
        self.parent_pid = parent_pid
        self.head: asyncio.subprocess.Process | None = None
        self.stopping = False
        self.served = False  # some head said it serves
        self._serving_now = False  # the running (or last) head said it serves
        self._heard: float | None = None  # when the running head last said it runs (once it serves)
        self._background = BackgroundTasks("supervisor")

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)
        if self.parent_pid:
            self._background.spawn(self._watch_parent())
        self._background.spawn(self._watch_head())
        quick_deaths = failed_starts = 0  # in a row: each soon after its start; each before it served
        while True:
            started = loop.time()
            self._serving_now = False
            try:
                code = await self._run_head(restarted=self.served)
            except OSError as exc:  # no process or socket to be had now (EAGAIN, EMFILE): try again
                log.error("could not start a head: %s", exc)
                code = -1
            if self.stopping or code == 0:
                return 0
            if code == SUPERSEDED_EXIT:
                log.error("another head has taken over the cluster; this supervisor stops")
                return code
            failed_starts = 0 if self._serving_now else failed_starts + 1
            if not self.served or failed_starts >= MAX_FAILED_STARTS:
                log.error("the head exited with %s before it served%s; giving up", code,
                          f", {failed_starts} times in a row" if self.served else "")
                return code or 1
            if loop.time() - started > STABLE_AFTER_S:
                quick_deaths = 0
            pause = RESTART_PAUSES_S[min(quick_deaths, len(RESTART_PAUSES_S) - 1)]
            quick_deaths += 1
            log.warning("the head exited with %s; restarting it in %.1f s", code, pause)
            await asyncio.sleep(pause)
            if self.stopping:
                return 0

    def stop(self) -> None:
        """Stop the cluster: the head stops its nodes and shards, then exits, and so does this."""
        self.stopping = True
        if self.head is not None and self.head.returncode is None:
            self.head.terminate()

    async def _watch_head(self) -> None:
        async for now, paused in ticks(ALIVE_EVERY_S, 2 * ALIVE_EVERY_S):
            if paused and self._heard is not None:
                self._heard = now  # this process did not run (stopped): the head's notices wait unread
            head = self.head
            if self._heard is not None and now - self._heard > HUNG_AFTER_S and head and head.returncode is None:
                log.error("the head (pid %d) has not said it runs for %.1f s (stopped or stuck); killing it",
                          head.pid, now - self._heard)
                head.kill()
                self._heard = None

    async def _run_head(self, restarted: bool) -> int:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            env = dict(os.environ, **{SUPERVISOR_FD_ENV: str(theirs.fileno())})
            argv = [*self.head_argv, *(["--restarted"] if restarted else [])]
            self.head = await asyncio.create_subprocess_exec(*dying_with_us(argv), env=env,
                                                             pass_fds=(theirs.fileno(),))
            if self.stopping:  # asked to stop while it started
                self.head.terminate()
            theirs.close()
            ours.setblocking(False)
            loop = asyncio.get_running_loop()
            loop.add_reader(ours, self._readable, ours)
            try:
                return await self.head.wait()
            finally:
                self._heard = None
                loop.remove_reader(ours)
        finally:
            ours.close()
            theirs.close()

    def _readable(self, sock: socket.socket) -> None:
        try:
            message, fds, _, _ = socket.recv_fds(sock, MAX_REQUEST_BYTES, 1)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            message, fds = b"", []
        if not message:  # the head's end closed: it is exiting
            asyncio.get_running_loop().remove_reader(sock)
            return
        request = json.loads(message)
        if self._heard is not None or request.get("serving"):
            self._heard = asyncio.get_running_loop().time()  # any message says the head runs
        if request.get("serving") or request.get("alive"):
            self.served = self._serving_now = True
            return
        self._background.spawn(self._start(sock, request, fds[0] if fds else None))

    async def _start(self, sock: socket.socket, request: dict, stdin: int | None) -> None:
        try:
            log_path = Path(request["log"]) if request["log"] else None
            process = await spawn(request["argv"], request["env"], log_path, stdin=stdin)
            reply = {"pid": process.pid}
        except Exception as exc:  # noqa: BLE001 - the head gets the error, and the supervisor goes on
            reply = {"error": str(exc)}
        finally:
            if stdin is not None:
                os.close(stdin)
        try:
            sock.send(json.dumps(reply).encode())
        except OSError:
            return  # the head that asked is gone; its successor adopts the process or it exits
        if "pid" in reply:
            await process.wait()  # reaped here, whoever watches it

    async def _watch_parent(self) -> None:
        while os.getppid() == self.parent_pid:
            await asyncio.sleep(0.5)
        log.warning("the process that started the cluster is gone; stopping it")
        self.stop()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--parent-pid", type=int, default=None, help="Stop the cluster when this process exits.")
@click.argument("head_argv", nargs=-1, required=True, type=click.UNPROCESSED)
def main(parent_pid: int | None, head_argv: tuple[str, ...]) -> None:
    """Run HEAD_ARGV (a head's command line) and restart it whenever it dies."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    sys.exit(asyncio.run(Supervisor(list(head_argv), parent_pid).run()))


if __name__ == "__main__":
    main()
