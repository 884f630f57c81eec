"""What head and node processes share at start-up: logging, the token, the hash seed."""

from __future__ import annotations

import logging
import os
import sys

from actorrt.cluster.session import TOKEN_ENV

# Every node process hashes strings with the same seed: a replay runs in a new process, and code
# that iterates a set or dict keyed by strings must see the same order there as it did before the
# failure (with Python's per-process random seed it would not, and exact replay would silently
# diverge). The price is the hash-flooding protection of a random seed, in node processes only.
NODE_HASH_SEED = "0"


def daemon_setup(prog: str) -> str:
    """Start logging, and return the cluster token from the environment (exit if it is missing)."""
    token = os.environ.get(TOKEN_ENV)
    if not token:
        sys.exit(f"{prog}: set {TOKEN_ENV} to the cluster token")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    return token
