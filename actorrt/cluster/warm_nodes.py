"""Node processes the head keeps warm for restarts.

A node process spends about 0.2 s importing Python, numpy and grpc before it can serve. A warm
one (started with ``--spare``) has done that and waits on stdin for the slot to take and the log
file to write: a restarted slot takes one and registers 10-30 ms after the failure, and another
is started behind it. One that exits unused (a fresh process forked by the head does crash now
and then) is replaced after a pause, so that a spare that cannot start does not spin.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from actorrt.util.processes import spawn

log = logging.getLogger(__name__)

# A warm node process that exited unused is replaced after this pause.
RESTART_DELAY_S = 0.5


class WarmNodes:
    def __init__(self, argv: list[str], env: dict[str, str], log_path: Path,
                 run: Callable[[Coroutine[Any, Any, Any]], Any]):
        self._argv = [*argv, "--spare"]
        self._env = env
        self._log_path = log_path
        self._run = run  # runs a coroutine in the head's background
        self._idle: list[asyncio.subprocess.Process] = []
        # Handed a slot: from then on the head watches it as that node, and its exit is the node's
        # failure (whose restart takes another), not a spare to replace.
        self._handed: set[asyncio.subprocess.Process] = set()
        self._stopped = False

    def keep(self, count: int) -> None:
        for _ in range(count):
            self._run(self._start())

    async def take(self, slot: int, log_path: Path) -> asyncio.subprocess.Process | None:
        """A warm node process, told to serve ``slot`` and log to ``log_path``; None if none is."""
        while self._idle and not self._stopped:
            spare = self._idle.pop(0)
            if spare.returncode is not None:
                continue  # its watcher starts another
            self._run(self._start())  # another behind it
            self._handed.add(spare)
            try:
                spare.stdin.write(f"{slot} {log_path}\n".encode())
                await spare.stdin.drain()
                spare.stdin.close()
            except (BrokenPipeError, ConnectionResetError):
                continue  # it died meanwhile: the one started behind it replaces it
            return spare
        return None

    def stop(self) -> None:
        self._stopped = True
        for spare in self._idle:
            if spare.returncode is None:
                spare.kill()

    async def _start(self) -> None:
        spare = await spawn(self._argv, self._env, self._log_path, stdin=asyncio.subprocess.PIPE)
        if self._stopped:
            spare.kill()
            return
        self._idle.append(spare)
        self._run(self._watch(spare))

    async def _watch(self, spare: asyncio.subprocess.Process) -> None:
        code = await spare.wait()
        if self._stopped or spare in self._handed:
            self._handed.discard(spare)
            return
        if spare in self._idle:
            self._idle.remove(spare)
        log.warning("the warm node process %d exited with %s before a restart needed it; starting another",
                    spare.pid, code)
        await asyncio.sleep(RESTART_DELAY_S)
        if not self._stopped:
            await self._start()
