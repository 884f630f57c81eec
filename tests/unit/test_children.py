"""A head's processes by pidfd: exits seen whoever the parent is, and a reused pid never adopted."""

from __future__ import annotations

import asyncio
import subprocess

from actorrt.util.children import Child, start_child, start_time


async def test_a_child_sees_its_process_exit_and_signals_only_it():
    child = await start_child(["sleep", "30"])
    assert child.alive() and child.started == start_time(child.pid) > 0
    child.kill()
    await asyncio.wait_for(child.wait(), 5.0)
    assert not child.alive()
    child.kill()  # after the exit: nothing to signal, and no error


async def test_a_pid_is_adopted_only_with_the_start_time_recorded_for_it():
    process = subprocess.Popen(["sleep", "30"])
    try:
        started = start_time(process.pid)
        assert Child(process.pid, started).alive()
        # Another start time: the pid now names another process than the one recorded.
        stranger = Child(process.pid, started + 1)
        assert not stranger.alive()
        await asyncio.wait_for(stranger.wait(), 1.0)  # counts as exited at once
        stranger.kill()  # and is never signalled
        assert process.poll() is None
    finally:
        process.kill()
        process.wait()
    assert not Child(process.pid, started).alive()  # reaped: gone
