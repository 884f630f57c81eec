"""Launching child processes that do not outlive their parent."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

# Linux: children get SIGKILL from the kernel when their parent dies, even if the parent is
# SIGKILLed itself, so a killed head leaves no redis-server or node behind. The child asks for it
# (prctl PR_SET_PDEATHSIG, kept across exec) in a small trampoline that then execs the real
# program: doing it in a preexec_fn after fork is unsafe in a process with threads (grpc's), and
# did crash fresh children now and then. If the parent died before the prctl, the child exits.
_TRAMPOLINE = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL('libc.so.6', use_errno=True).prctl(1, signal.SIGKILL)\n"
    "if os.getppid() != int(sys.argv[1]): sys.exit(1)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def dying_with_us(argv: Sequence[str]) -> list[str]:
    """``argv`` wrapped so that the process it starts gets SIGKILL when this one dies."""
    if sys.platform != "linux":
        return list(argv)
    program = argv[0] if os.path.isabs(argv[0]) else (shutil.which(argv[0]) or argv[0])
    return [sys.executable, "-S", "-c", _TRAMPOLINE, str(os.getpid()), program, *argv[1:]]


async def spawn(argv: Sequence[str], env: Mapping[str, str] | None = None, log_path: Path | None = None,
                stdin: int | None = None) -> asyncio.subprocess.Process:
    """Start ``argv`` with its output appended to ``log_path`` (or discarded); it dies with us."""
    out = open(log_path, "ab") if log_path is not None else asyncio.subprocess.DEVNULL  # noqa: SIM115
    try:
        return await asyncio.create_subprocess_exec(
            *dying_with_us(argv), env=dict(env) if env is not None else None, stdin=stdin,
            stdout=out, stderr=asyncio.subprocess.STDOUT,
        )
    finally:
        if log_path is not None:
            out.close()


def stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the parenthesised command name (which may hold
    spaces): state, ppid, ...; None if the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (exited, not reaped yet) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = stat_fields(pid)
    return fields is None or fields[0] != "Z"  # unreadable (another user's): it runs
