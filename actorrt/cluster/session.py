"""The session file: how to reach a running cluster and the token it requires.

The head writes it (mode 0600, readable by its user only) into the session directory; the CLI,
drivers and nodes on the same machine read it. The token never appears on a command line.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path

TOKEN_ENV = "ACTORRT_TOKEN"
SESSION_DIR_ENV = "ACTORRT_SESSION_DIR"
SESSION_FILE = "session.json"


@dataclass(frozen=True)
class Session:
    head_address: str
    token: str
    head_pid: int
    session_dir: str


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


def token_for(address: str, token: str | None = None) -> str:
    """The token to use for ``address``: given, from the environment, or from the session file."""
    if token:
        return token
    if os.environ.get(TOKEN_ENV):
        return os.environ[TOKEN_ENV]
    session = read()
    if session is not None and session.head_address == address:
        return session.token
    from actorrt.exceptions import ClusterError

    raise ClusterError(
        f"no token for the cluster at {address}: pass token=... (--token on the command line), set {TOKEN_ENV}, "
        f"or run on the head's machine (session file {default_dir() / SESSION_FILE})"
    )
