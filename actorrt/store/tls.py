"""TLS to the lineage store's Redis servers (Redis 6 or newer built with TLS: its ``tls-port``).

A TLS cluster's own shards serve TLS only, with the cluster's certificate, and require clients to
present one signed by its CA: the same mutual TLS as between the cluster's processes. An external
store is reached with TLS when its URL says ``rediss://`` (or ``rediss+cluster://``), checked
against the cluster's CA, or the system's when the cluster has none.
"""

from __future__ import annotations

import functools
import ssl
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class StoreTls:
    """The CA the store's certificates must be signed by (None: the system's), and this process's
    certificate and key to present (None: none; a server needs both)."""

    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None

    def redis_kwargs(self) -> dict[str, object]:
        """What redis-py's clients take for this (servers are checked, their names too)."""
        return {"ssl": True, "ssl_ca_certs": _str(self.ca), "ssl_certfile": _str(self.cert),
                "ssl_keyfile": _str(self.key), "ssl_cert_reqs": "required", "ssl_check_hostname": True}

    @functools.cached_property
    def client_context(self) -> ssl.SSLContext:
        """A client's: the server's certificate checked against the CA and the address dialled."""
        context = ssl.create_default_context(cafile=_str(self.ca))
        if self.cert is not None:
            context.load_cert_chain(self.cert, self.key)
        return context

    def server_config(self) -> str:
        """redis.conf lines that make a server on ``port`` serve TLS only there, require clients'
        certificates signed by the CA, and replicate over TLS."""
        if self.cert is None or self.key is None or self.ca is None:
            raise ValueError("a store server needs a certificate, its key and the CA")
        return (f"tls-cert-file {self.cert}\ntls-key-file {self.key}\ntls-ca-cert-file {self.ca}\n"
                "tls-auth-clients yes\ntls-replication yes\n")


def _str(path: Path | None) -> str | None:
    return None if path is None else str(path)
