"""A periodic loop that notices when its own process did not run (SIGSTOP, a paused VM, a starved
loop): what it missed meanwhile says nothing about anyone else."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator


async def ticks(interval: float, paused_after: float) -> AsyncIterator[tuple[float, bool]]:
    """Every ``interval`` seconds, ``(now, paused)``: the loop's time, and whether this tick came more
    than ``paused_after`` seconds after the last one."""
    loop = asyncio.get_running_loop()
    last = loop.time()
    while True:
        await asyncio.sleep(interval)
        now = loop.time()
        yield now, now - last > paused_after
        last = now
