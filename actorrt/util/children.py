"""The processes a head runs (nodes, store shards), watched through pidfds so that a restarted head
can adopt those of the head before it.

A head under a supervisor (``actorrt.cluster.supervisor``) asks it to start them: they are the supervisor's
children, so they outlive a head that dies, and die with the supervisor. A head run on its own
starts them itself (they die with it). Either way the head holds a ``Child``: a pidfd, which says
when the process exits whoever its parent is, and signals it without the risk of a reused pid.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import socket
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from actorrt.exceptions import ClusterError
from actorrt.util.processes import spawn, stat_fields

# Set in a supervised head's environment: the number of its end of the socket to its supervisor.
SUPERVISOR_FD_ENV = "ACTORRT_SUPERVISOR_FD"
MAX_REQUEST_BYTES = 1 << 20


class Child:
    """A process, by pidfd (one gone already counts as exited)."""

    def __init__(self, pid: int, started: int | None = None) -> None:
        """With ``started`` (a process a head before this one started): the process ``pid`` only if
        it started then; one that started at another time got the pid since, and is not ours."""
        self.pid = pid
        self._exited: asyncio.Future[None] | None = None
        try:
            self._fd = os.pidfd_open(pid)
        except ProcessLookupError:
            self._fd = -1
        self.started = start_time(pid) if self._fd >= 0 else 0  # read after the pidfd: the same process
        if started is not None and self.started != started and self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def alive(self) -> bool:
        if self._fd < 0:
            return False
        if self._exited is not None:
            return not self._exited.done()
        # Nobody waits on it yet: ask the pidfd now (it reads as ready once its process has exited).
        return not select.select([self._fd], [], [], 0)[0]

    async def wait(self) -> None:
        """Return once the process has exited."""
        if self._fd < 0:
            return
        if self._exited is None:
            loop = asyncio.get_running_loop()
            self._exited = loop.create_future()

            def readable() -> None:  # a pidfd reads as ready once its process has exited
                loop.remove_reader(self._fd)
                os.close(self._fd)
                if not self._exited.done():
                    self._exited.set_result(None)

            loop.add_reader(self._fd, readable)
        await asyncio.shield(self._exited)

    def send_signal(self, sig: int) -> None:
        if self.alive():
            try:
                signal.pidfd_send_signal(self._fd, sig)
            except (ProcessLookupError, OSError):
                pass  # exited meanwhile

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    async def stop(self, timeout: float) -> None:
        """SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
        self.terminate()
        try:
            await asyncio.wait_for(self.wait(), timeout)
        except TimeoutError:
            self.kill()
            await self.wait()


def start_time(pid: int) -> int:
    """When ``pid`` started, in clock ticks after boot (0 if it is gone)."""
    fields = stat_fields(pid)
    return int(fields[19]) if fields else 0  # starttime, the 22nd field of stat


class _Supervisor:
    """This head's socket to its supervisor: one request and its reply at a time."""

    def __init__(self, fd: int) -> None:
        self._sock = socket.socket(fileno=fd)
        self._lock = threading.Lock()

    def notify(self, notice: str, blocking: bool = False) -> None:
        """Send ``notice`` (no reply). Unless ``blocking``, skipped rather than wait: while a request
        is under way (the supervisor hears from this head then anyway), or the supervisor reads
        nothing (it is stopped: the socket's buffer is full)."""
        if self._lock.acquire(blocking=blocking):
            try:
                self._sock.send(json.dumps({notice: True}).encode(), 0 if blocking else socket.MSG_DONTWAIT)
            except BlockingIOError:
                pass
            finally:
                self._lock.release()

    def spawn(self, request: dict, stdin: int | None) -> int:
        with self._lock:
            socket.send_fds(self._sock, [json.dumps(request).encode()], [stdin] if stdin is not None else [])
            reply = json.loads(self._sock.recv(MAX_REQUEST_BYTES) or b'{"error": "the supervisor is gone"}')
        if "error" in reply:
            raise ClusterError(f"the supervisor could not start {request['argv'][0]}: {reply['error']}")
        return int(reply["pid"])


_supervisor: _Supervisor | None = None


def _the_supervisor() -> _Supervisor | None:
    global _supervisor
    if _supervisor is None and os.environ.get(SUPERVISOR_FD_ENV):
        _supervisor = _Supervisor(int(os.environ[SUPERVISOR_FD_ENV]))
    return _supervisor


def supervisor_pid() -> int:
    """The pid of this head's supervisor; 0 when it runs on its own."""
    return os.getppid() if _the_supervisor() is not None else 0


def serving() -> None:
    """Tell the supervisor, if any, that this head serves (a first head that exits before it does
    is not restarted)."""
    if (supervisor := _the_supervisor()) is not None:
        supervisor.notify("serving", blocking=True)


async def tell_alive(interval: float) -> None:
    """Tell the supervisor, if any, every ``interval`` seconds that this head runs (it kills one
    that stops telling: hung or stopped)."""
    if (supervisor := _the_supervisor()) is None:
        return
    while True:
        supervisor.notify("alive")
        await asyncio.sleep(interval)


async def start_child(argv: Sequence[str], env: Mapping[str, str] | None = None, log_path: Path | None = None,
                      stdin: int | None = None) -> Child:
    """Start ``argv`` (output appended to ``log_path``; ``stdin`` a descriptor it reads, closed here
    once handed over) through the supervisor if this process has one, else as a child of its own."""
    try:
        if (supervisor := _the_supervisor()) is not None:
            # Its socket is the head's alone: what it starts does not inherit the variable.
            env = {k: v for k, v in (os.environ if env is None else env).items() if k != SUPERVISOR_FD_ENV}
            request = {"argv": list(argv), "env": env,
                       "log": str(log_path) if log_path is not None else None}
            pid = await asyncio.get_running_loop().run_in_executor(None, supervisor.spawn, request, stdin)
        else:
            pid = (await spawn(argv, env, log_path, stdin=stdin)).pid
    finally:
        if stdin is not None:
            os.close(stdin)
    return Child(pid)
