"""What every benchmark writes beside its results: when it ran, on what, at which commit."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess
from pathlib import Path
from typing import Any


def run_meta(**params: Any) -> tuple[str, dict[str, Any]]:
    """A time stamp for the result files' names, and ``params`` with the machine and the commit."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return stamp, {**params, "cpus": os.cpu_count(), "python": platform.python_version(), "time": stamp,
                   "commit": commit()}


def commit() -> str:
    """The checkout's short commit ("?" outside a git checkout)."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent).stdout.strip() or "?"
    except OSError:
        return "?"
