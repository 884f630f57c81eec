"""The session file: how to reach a running cluster and the token it requires.

The head writes it (mode 0600, readable by its user only) into the session directory; the CLI,
drivers and nodes on the same machine read it. The token never appears on a command line.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
from dataclasses import asdict, dataclass
from pathlib import Path

from actorrt.exceptions import ClusterError
from actorrt.util.processes import process_alive

TOKEN_ENV = "ACTORRT_TOKEN"
SESSION_DIR_ENV = "ACTORRT_SESSION_DIR"
SESSION_FILE = "session.json"


@dataclass(frozen=True)
class Session:
    head_address: str
    token: str
    head_pid: int
    session_dir: str
    supervisor_pid: int = 0  # the process that restarts the head (0: none)
    standby: bool = False  # a standby head, not serving (head_address is empty) until it takes over
    metrics_url: str = ""  # the head's Prometheus endpoint, if it serves one
    dashboard_url: str = ""  # the head's web dashboard, if it serves one

    @property
    def root_pid(self) -> int:
        """The process whose end is the cluster's: the supervisor, else the head."""
        return self.supervisor_pid or self.head_pid


def default_dir() -> Path:
    return Path(os.environ.get(SESSION_DIR_ENV) or Path.home() / ".actorrt")


def new_token() -> str:
    return secrets.token_urlsafe(32)


def write(session: Session) -> Path:
    """Write atomically, readable only by the owner."""
    directory = Path(session.session_dir)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / SESSION_FILE
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)  # O_EXCL below: never reuse a file someone else may have opened
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(asdict(session), f)
    os.replace(tmp, path)
    return path


def read(directory: Path | str | None = None) -> Session | None:
    path = Path(directory or default_dir()) / SESSION_FILE
    try:
        return Session(**json.loads(path.read_text()))
    except (FileNotFoundError, json.JSONDecodeError, TypeError):
        return None


def remove(directory: Path | str) -> None:
    (Path(directory) / SESSION_FILE).unlink(missing_ok=True)


def resolve(address: str) -> str:
    """The head address ``address`` means: the local head's for ``"auto"`` (from the session file);
    raises ClusterError if no head runs there, or nothing answers at the address."""
    if address == "auto":
        session = read()
        if session is None:
            raise ClusterError(f"address='auto': no cluster runs on this machine (no session file at "
                               f"{default_dir() / SESSION_FILE}); start one with `actorrt start --head`, or call "
                               f"actorrt.init() without an address for an embedded one")
        if not process_alive(session.root_pid):
            raise ClusterError(f"address='auto': the session file names a head (pid {session.root_pid}, "
                               f"{session.head_address}) that is not running any more")
        address = session.head_address
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"address must be HOST:PORT or 'auto', not {address!r}")
    try:
        socket.create_connection((host, int(port)), timeout=5.0).close()
    except OSError as exc:
        raise ClusterError(f"no head answers at {address} ({exc.strerror or exc}): is the cluster running, and "
                           f"is that its address? (`actorrt status` on the head's machine prints it)") from None
    return address


# What a head leaves in its session directory (besides the session file), by the path parts.
STORE_DIR = "store-{}"  # per shard
CHECKPOINTS_DIR = "checkpoints"
LOGS_DIR = "logs"


def remove_leftovers(directory: Path, keep_logs: bool = False) -> list[Path]:
    """Remove the store shards' files, the default checkpoint directory and (unless ``keep_logs``)
    the logs a stopped head left in ``directory``; returns what could not be removed."""
    doomed = [*directory.glob(STORE_DIR.format("*")), directory / CHECKPOINTS_DIR]
    if not keep_logs:
        doomed.append(directory / LOGS_DIR)
    left = []
    for path in doomed:
        shutil.rmtree(path, ignore_errors=True)
        if path.exists():
            left.append(path)
    return left


def token_for(address: str, token: str | None = None) -> str:
    """The token to use for ``address``: given, from the environment, or from the session file."""
    if token:
        return token
    if os.environ.get(TOKEN_ENV):
        return os.environ[TOKEN_ENV]
    session = read()
    if session is not None and session.head_address == address:
        return session.token
    raise ClusterError(
        f"no token for the cluster at {address}: pass token=... (--token on the command line), set {TOKEN_ENV}, "
        f"or run on the head's machine (session file {default_dir() / SESSION_FILE})"
    )
