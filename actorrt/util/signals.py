"""Cleaning up before a termination signal ends the process as it would have anyway."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import Any

_cleanups: dict[int, Callable[[], None]] = {}


def clean_up_before(signum: int, cleanup: Callable[[], None]) -> None:
    """On ``signum``, run ``cleanup`` and then let the signal do what it does by default (end the
    process); unless the program handles ``signum`` itself, or this is not the main thread."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signum) is signal.SIG_DFL:
        _cleanups[signum] = cleanup
        signal.signal(signum, _clean_up_then_die)


def forget(signum: int) -> None:
    """Put back the default action of ``signum``, if ``clean_up_before`` had replaced it."""
    if (signal.getsignal(signum) is _clean_up_then_die and _cleanups.pop(signum, None) is not None
            and threading.current_thread() is threading.main_thread()):
        signal.signal(signum, signal.SIG_DFL)


def _clean_up_then_die(signum: int, frame: Any) -> None:
    signal.signal(signum, signal.SIG_DFL)  # a second signal ends it at once
    cleanup = _cleanups.pop(signum, None)
    try:
        if cleanup is not None:
            cleanup()
    except Exception:  # noqa: BLE001 - dying anyway: the signal below ends the process
        pass
    os.kill(os.getpid(), signum)
