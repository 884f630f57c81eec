"""What head and node processes share at start-up: logging, the token and TLS, a node's environment."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping

from actorrt.cluster.session import TOKEN_ENV
from actorrt.exceptions import ClusterError
from actorrt.net.tls import TlsFiles

# Every node process hashes strings with the same seed: a replay runs in a new process, and code
# that iterates a set or dict keyed by strings must see the same order there as it did before the
# failure (with Python's per-process random seed it would not, and exact replay would silently
# diverge). The price is the hash-flooding protection of a random seed, in node processes only.
NODE_HASH_SEED = "0"

# The node processes of a host share its cores: numpy's BLAS starting a thread per core in each of
# them oversubscribes it (a logistic-regression step took 45 ms against 15.7 ms with one thread
# per process). One thread each, as Ray gives its workers, unless the environment sets another.
BLAS_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                         "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


def node_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment a node process runs in: ``environ`` with the node hash seed, and one BLAS
    thread where ``environ`` does not choose a number."""
    env = dict(environ, PYTHONHASHSEED=NODE_HASH_SEED)
    for name in BLAS_THREAD_VARIABLES:
        env.setdefault(name, "1")
    return env


def daemon_setup(prog: str) -> tuple[str, TlsFiles | None]:
    """Start logging, and return the cluster token and the TLS files from the environment (exit if
    the token is missing, or the TLS settings are incomplete or their files unusable)."""
    token = os.environ.get(TOKEN_ENV)
    if not token:
        sys.exit(f"{prog}: set {TOKEN_ENV} to the cluster token")
    try:
        tls = TlsFiles.from_env()
    except ClusterError as exc:
        sys.exit(f"{prog}: {exc}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    return token, tls
