"""Waiting in tests for what the cluster does in the background (a restart, a collection)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(measure: Callable[[], T], ok: Callable[[T], object] = bool, timeout: float = 30.0,
               what: str = "the condition") -> T:
    """``measure()`` once ``ok`` of it holds; fails, showing the last value, after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not ok(value := measure()):
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}; last: {value!r}"[:800]
        time.sleep(0.05)
    return value
