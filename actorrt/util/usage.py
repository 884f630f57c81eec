"""This process's CPU and resident memory, for the stats its heartbeats carry."""

from __future__ import annotations

import os
import resource
import sys
import time

# CPU is the share of one core over at least this much of the recent past.
CPU_WINDOW_S = 1.0
_PAGE = os.sysconf("SC_PAGE_SIZE")


class ProcessUsage:
    """Reads cost a couple of system calls, so every heartbeat can take one."""

    def __init__(self) -> None:
        self._since = (time.monotonic(), time.process_time())
        self.cpu_percent = 0.0

    def sample(self) -> tuple[float, int]:
        """(CPU percent of one core over the last ``CPU_WINDOW_S`` or so, resident bytes)."""
        now, cpu = time.monotonic(), time.process_time()
        wall = now - self._since[0]
        if wall >= CPU_WINDOW_S:
            self.cpu_percent = 100.0 * (cpu - self._since[1]) / wall
            self._since = (now, cpu)
        return self.cpu_percent, resident_bytes()


def resident_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:  # not Linux: the peak is the best there is (macOS counts it in bytes, others in KiB)
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
