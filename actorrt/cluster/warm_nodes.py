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
import os
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from actorrt.util.children import Child, start_child

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
        # Each with the write end of its stdin: a spare whose head is gone reads its end and exits.
        self._idle: list[tuple[Child, int]] = []
        # Handed a slot: from then on the head watches it as that node, and its exit is the node's
        # failure (whose restart takes another), not a spare to replace.
        self._handed: set[Child] = set()
        self._stopped = False

    def keep(self, count: int) -> None:
        for _ in range(count):
            self._run(self._start())

    async def take(self, slot: int, log_path: Path) -> Child | None:
        """A warm node process, told to serve ``slot`` and log to ``log_path``; None if none is."""
        while self._idle and not self._stopped:
            spare, stdin = self._idle.pop(0)
            if not spare.alive():
                os.close(stdin)
                continue  # its watcher starts another
            self._run(self._start())  # another behind it
            self._handed.add(spare)
            try:
                os.write(stdin, f"{slot} {log_path}\n".encode())  # one short line: never blocks
            except OSError:
                continue  # it died meanwhile: the one started behind it replaces it
            finally:
                os.close(stdin)
            return spare
        return None

    def stop(self) -> None:
        self._stopped = True
        for spare, stdin in self._idle:
            spare.kill()
            os.close(stdin)
        self._idle.clear()

    async def _start(self) -> None:
        stdin, writer = os.pipe()
        try:
            spare = await start_child(self._argv, self._env, self._log_path, stdin=stdin)
        except BaseException:
            os.close(writer)
            raise
        if self._stopped:
            spare.kill()
            os.close(writer)
            return
        self._idle.append((spare, writer))
        self._run(self._watch(spare))

    async def _watch(self, spare: Child) -> None:
        await spare.wait()
        if self._stopped or spare in self._handed:
            self._handed.discard(spare)
            return
        for entry in [e for e in self._idle if e[0] is spare]:
            self._idle.remove(entry)
            os.close(entry[1])
        log.warning("the warm node process %d exited before a restart needed it; starting another", spare.pid)
        await asyncio.sleep(RESTART_DELAY_S)
        if not self._stopped:
            await self._start()
