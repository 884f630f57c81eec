"""``--tls`` of the benchmarks: a throwaway CA and certificate for this machine, set in the
environment that ``actorrt.init`` reads (and every process it starts inherits), for one run."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def tls_environment() -> Iterator[None]:
    """Within it, ``actorrt.init`` (an embedded cluster, and nodes started by hand) runs in mutual TLS."""
    from actorrt.cluster.certs import CA_CERT, CERT, KEY, make_certs
    from actorrt.net.tls import TlsFiles

    with tempfile.TemporaryDirectory(prefix="actorrt-bench-tls-") as directory:
        d = Path(directory)
        make_certs(d, ["127.0.0.1", "localhost"])
        variables = TlsFiles(d / CERT, d / KEY, d / CA_CERT).env()
        saved = {name: os.environ.get(name) for name in variables}
        os.environ.update(variables)
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
