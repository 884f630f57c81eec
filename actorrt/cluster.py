"""Starting a head process (which starts the nodes and store shards) and stopping it.

Used by ``actorrt.init()`` for the embedded default and by ``actorrt start --head``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from actorrt import session
from actorrt.exceptions import ClusterError
from actorrt.fault_tolerance import FaultToleranceOptions
from actorrt.processes import process_alive
from actorrt.session import TOKEN_ENV, Session
from actorrt.store import STORE_URL_ENV, parse_store_url

HEAD_START_TIMEOUT_S = 60.0


@dataclass
class HeadProcess:
    process: subprocess.Popen
    session: Session

    @property
    def log_path(self) -> Path:
        return Path(self.session.session_dir) / "logs" / "head.log"

    def wait_stopped(self, timeout: float = 15.0) -> None:
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_head(
    session_dir: Path,
    *,
    num_nodes: int,
    store_shards: int,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str | None = None,
    tied_to_caller: bool = True,
    fault_tolerance: FaultToleranceOptions = FaultToleranceOptions(),
    store_url: str | None = None,
) -> HeadProcess:
    """Launch a head and wait until its session file names its address.

    With ``tied_to_caller`` the head (and so its nodes and shards) stops when this process exits;
    the CLI launches a head that outlives it instead. ``store_url`` names an external lineage store
    (see ``actorrt.store.parse_store_url``); then the head starts no shards of its own.
    """
    if num_nodes < 0 or store_shards < 1:
        raise ValueError("need num_nodes >= 0 and store_shards >= 1")
    if store_url:
        parse_store_url(store_url)
    session_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    existing = session.read(session_dir)
    if existing is not None and process_alive(existing.head_pid):
        raise ClusterError(f"a head is already running for {session_dir} at {existing.head_address}; stop it first")
    session.remove(session_dir)
    token = token or session.new_token()
    logs = session_dir / "logs"
    logs.mkdir(exist_ok=True)
    argv = [
        sys.executable, "-m", "actorrt.head", "--host", host, "--port", str(port), "--nodes", str(num_nodes),
        "--store-shards", str(store_shards), "--session-dir", str(session_dir),
    ]
    ft = fault_tolerance
    argv += ["--ft", ft.mode, "--store-delay-ms", str(ft.store_delay_ms), "--stash-limit", str(ft.stash_limit)]
    if ft.max_forwards is not None:
        argv += ["--max-forwards", str(ft.max_forwards)]
    if ft.checkpoint_dir:
        argv += ["--checkpoint-dir", ft.checkpoint_dir]
    if tied_to_caller:
        argv += ["--parent-pid", str(os.getpid())]
    with open(logs / "head.log", "ab") as log:
        proc = subprocess.Popen(
            argv, env=dict(os.environ, **{TOKEN_ENV: token, STORE_URL_ENV: store_url or ""}), stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=not tied_to_caller,
        )
    deadline = time.monotonic() + HEAD_START_TIMEOUT_S
    while time.monotonic() < deadline:
        found = session.read(session_dir)
        if found is not None and found.head_pid == proc.pid:
            return HeadProcess(proc, found)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    tail = (logs / "head.log").read_text(errors="replace")[-2000:]
    raise ClusterError(f"the head did not start (exit code {proc.poll()}); its log ends:\n{tail}")

