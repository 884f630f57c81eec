"""The call windows of back-pressure, without sockets: counts, blocking waits and awaits."""

from __future__ import annotations

import asyncio
import threading
import time

from actorrt.core.call_windows import CallWindows

CHANNEL = (b"driver", b"actor")


async def test_calls_count_until_answered_per_channel():
    windows = CallWindows(asyncio.get_running_loop())
    windows.opened(CHANNEL, b"t1")
    windows.opened(CHANNEL, b"t2")
    windows.opened((b"other", b"actor"), b"t3")
    assert windows.in_flight(CHANNEL) == 2
    windows.answered(b"t1")
    windows.answered(b"t1")  # a result that comes twice counts once
    windows.answered(b"unknown")
    assert windows.in_flight(CHANNEL) == 1
    assert windows.in_flight((b"other", b"actor")) == 1


async def test_an_await_returns_when_a_call_is_answered():
    windows = CallWindows(asyncio.get_running_loop())
    windows.opened(CHANNEL, b"t1")
    waiting = asyncio.ensure_future(windows.wait(CHANNEL, 1))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    windows.answered(b"t1")
    await asyncio.wait_for(waiting, 1)


def test_a_blocked_thread_goes_on_when_a_call_is_answered():
    windows = CallWindows(asyncio.new_event_loop())
    windows.opened(CHANNEL, b"t1")
    windows.opened(CHANNEL, b"t2")
    released = []
    thread = threading.Thread(target=lambda: (windows.wait_blocking(CHANNEL, 2), released.append(time.monotonic())))
    thread.start()
    time.sleep(0.05)
    assert not released
    answered_at = time.monotonic()
    windows.answered(b"t2")
    thread.join(1)
    assert released and released[0] >= answered_at
