"""Starting a head (which starts the nodes and store shards), under a supervisor that restarts it.

Used by ``actorrt.init()`` for the embedded default and by ``actorrt start --head``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from actorrt.cluster import session
from actorrt.cluster.head_options import HeadOptions
from actorrt.cluster.session import TOKEN_ENV, Session
from actorrt.exceptions import ClusterError
from actorrt.net.tls import TlsFiles
from actorrt.store.opening import STORE_URL_ENV
from actorrt.util.processes import process_alive

HEAD_START_TIMEOUT_S = 60.0


@dataclass
class HeadProcess:
    process: subprocess.Popen  # the supervisor: the cluster ends with it
    session: Session

    @property
    def log_path(self) -> Path:
        return Path(self.session.session_dir) / session.LOGS_DIR / "head.log"

    def wait_stopped(self, timeout: float = 15.0) -> None:
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# The supervisor only watches processes: it loads its few modules, not the runtime that the
# package's ``__init__`` imports (0.4 s of the start of every cluster, on its critical path). Its
# first argument is the package's directory.
_SUPERVISOR = ("import sys, types; package = types.ModuleType('actorrt'); package.__path__ = [sys.argv.pop(1)]; "
               "sys.modules['actorrt'] = package; from actorrt.cluster.supervisor import main; main()")


def start_head(session_dir: Path, options: HeadOptions, *, token: str | None = None, tied_to_caller: bool = True,
               code_paths: Sequence[str] = (), tls: TlsFiles | None = None, standby: bool = False) -> HeadProcess:
    """Launch a head under its supervisor and wait until its session file names its address (a
    ``standby`` head's says it stands by: it takes over once the active head's lease runs out).

    With ``tied_to_caller`` the cluster (supervisor, head, nodes and shards) stops when this process exits;
    the CLI launches a head that outlives it instead. ``code_paths`` go first on the ``PYTHONPATH``
    of the head and its nodes (a driver's, so that they import what it imports). With ``tls`` the
    head and its nodes speak mutual TLS with these files (handed over in their environment).
    """
    options.check_store_url()
    session_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    existing = session.read(session_dir)
    if existing is not None and process_alive(existing.root_pid):
        raise ClusterError(f"a head is already running for {session_dir} at {existing.head_address}; stop it first")
    session.remove(session_dir)
    token = token or session.new_token()
    logs = session_dir / session.LOGS_DIR
    logs.mkdir(exist_ok=True)
    argv = [sys.executable, "-c", _SUPERVISOR, str(Path(__file__).resolve().parents[1])]
    if tied_to_caller:
        argv += ["--parent-pid", str(os.getpid())]
    argv += ["--", sys.executable, "-m", "actorrt.cluster.run_head", *options.argv(), "--session-dir", str(session_dir),
             *(["--standby"] if standby else [])]
    with open(logs / "head.log", "ab") as log:
        env = dict(os.environ, **{TOKEN_ENV: token, STORE_URL_ENV: options.store_url}, **(tls.env() if tls else {}))
        if code_paths:
            inherited = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
            env["PYTHONPATH"] = os.pathsep.join([*code_paths, *inherited])
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=not tied_to_caller)
    deadline = time.monotonic() + HEAD_START_TIMEOUT_S
    while time.monotonic() < deadline:
        found = session.read(session_dir)
        if found is not None and found.supervisor_pid == proc.pid:
            return HeadProcess(proc, found)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    tail = (logs / "head.log").read_text(errors="replace")[-2000:]
    raise ClusterError(f"the head did not start (exit code {proc.poll()}); its log ends:\n{tail}")

