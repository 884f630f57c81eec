"""Launching child processes that do not outlive their parent."""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # Linux: the kernel sends SIGKILL to the child when the parent dies, even if the parent is
    # SIGKILLed itself, so a killed head leaves no redis-server or node behind.
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


async def spawn(argv: Sequence[str], env: Mapping[str, str] | None = None, log_path: Path | None = None,
                stdin: int | None = None) -> asyncio.subprocess.Process:
    """Start ``argv`` with its output appended to ``log_path`` (or discarded)."""
    out = open(log_path, "ab") if log_path is not None else asyncio.subprocess.DEVNULL  # noqa: SIM115
    try:
        return await asyncio.create_subprocess_exec(
            *argv, env=dict(env) if env is not None else None, stdin=stdin,
            stdout=out, stderr=asyncio.subprocess.STDOUT,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
    finally:
        if log_path is not None:
            out.close()


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (exited, not reaped yet) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        # The state is the field after the parenthesised command name, which may contain spaces.
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def daemon_setup(prog: str) -> str:
    """Common start of the head and node entry points: logging, and the token from the environment."""
    from actorrt.session import TOKEN_ENV

    token = os.environ.get(TOKEN_ENV)
    if not token:
        sys.exit(f"{prog}: set {TOKEN_ENV} to the cluster token")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    return token
