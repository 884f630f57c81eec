"""Starting a head's node processes: a warm one when one waits, else a fresh one.

Each runs ``actorrt.cluster.node`` against the head's address, with the cluster token and the
head's TLS files in its environment, and logs to ``logs/node-<slot>.log`` in the session directory.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from actorrt.cluster import session
from actorrt.cluster.daemon import node_environment
from actorrt.cluster.session import TOKEN_ENV
from actorrt.cluster.warm_nodes import WarmNodes
from actorrt.net.tls import TlsFiles
from actorrt.util.children import Child, start_child


class NodeProcesses:
    def __init__(self, head_address: str, host: str, token: str, tls: TlsFiles | None, session_dir: Path,
                 run: Callable[[Coroutine[Any, Any, Any]], Any]) -> None:
        self._argv = [sys.executable, "-m", "actorrt.cluster.node", "--head", head_address, "--host", host]
        # As the node wants it (no re-exec), with the token and this head's TLS files.
        self._env = dict(node_environment(os.environ), **{TOKEN_ENV: token}, **(tls.env() if tls else {}))
        self._logs = session_dir / session.LOGS_DIR
        self._logs.mkdir(parents=True, exist_ok=True)
        self._run = run  # the head's background tasks
        self._warm: WarmNodes | None = None

    def keep_warm(self, count: int) -> None:
        """Keep ``count`` node processes started and waiting for a slot to take."""
        self._warm = WarmNodes(self._argv, self._env, self._logs / "node-spare.log", self._run)
        self._warm.keep(count)

    async def start(self, slot: int) -> Child:
        """A process for ``slot``; raises ClusterError or OSError if none could start."""
        log_path = self._logs / f"node-{slot}.log"
        process = await self._warm.take(slot, log_path) if self._warm is not None else None
        return process or await start_child([*self._argv, "--slot", str(slot)], self._env, log_path)

    def stop(self) -> None:
        if self._warm is not None:
            self._warm.stop()
