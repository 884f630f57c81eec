"""Fault injection on the control plane of an embedded cluster (``actorrt.init()`` in this process),
for tests, soaks and recovery benchmarks: kill its head, or keep it down a while; and the counting
actors they check exactly-once against (each answer must equal the caller's own count)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator

from actorrt.api import remote
from actorrt.cluster import session
from actorrt.core import context
from actorrt.exceptions import ActorRTError
from actorrt.util.processes import process_alive, stat_fields


@remote
class Counter:
    """Counts its calls; ``inc`` answers the count so far."""

    def __init__(self) -> None:
        self.n = 0

    def inc(self) -> int:
        self.n += 1
        return self.n

    def value(self) -> int:
        return self.n


@remote
class Relay:
    """Calls its counter from inside the cluster: no driver and no head on the way."""

    def __init__(self, counter) -> None:
        self.counter = counter

    async def inc(self) -> int:
        return await self.counter.inc.remote()


def cluster_session() -> session.Session:
    """The session file of this driver's embedded cluster: its head's and supervisor's pids."""
    head = getattr(context.current(), "head_process", None)
    found = session.read(head.session.session_dir) if head is not None else None
    if found is None:
        raise ActorRTError("no embedded cluster: call actorrt.init() without an address first")
    return found


def wait_for_new_head(old_pid: int, timeout: float = 60.0) -> session.Session:
    """The session once a head other than ``old_pid`` serves (it writes the file when it does)."""
    deadline = time.monotonic() + timeout
    while (found := cluster_session()).head_pid == old_pid or not process_alive(found.head_pid):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no new head within {timeout} s")
        time.sleep(0.01)
    return found


def kill_head() -> int:
    """SIGKILL the head (its supervisor restarts it); returns the killed head's pid."""
    pid = cluster_session().head_pid
    os.kill(pid, signal.SIGKILL)
    return pid


@contextlib.contextmanager
def head_down() -> Iterator[session.Session]:
    """The head SIGKILLed and kept down inside the block (its supervisor SIGSTOPped meanwhile);
    after it, restarted and serving again."""
    s = cluster_session()
    os.kill(s.supervisor_pid, signal.SIGSTOP)
    try:
        os.kill(s.head_pid, signal.SIGKILL)
        while process_alive(s.head_pid):
            time.sleep(0.01)
        yield s
    finally:
        os.kill(s.supervisor_pid, signal.SIGCONT)
    wait_for_new_head(s.head_pid)


def children_of(pid: int) -> set[int]:
    """The live processes whose parent is ``pid`` (a supervisor's: the head, nodes, store shards)."""
    return {int(entry) for entry in filter(str.isdigit, os.listdir("/proc"))
            if (fields := stat_fields(int(entry))) and fields[0] != "Z" and int(fields[1]) == pid}
