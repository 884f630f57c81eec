"""Mutual TLS between a cluster's processes: the three files, checked once, and what gRPC and the
transfer streams make of them.

A cluster runs all in TLS or all in plaintext. With TLS every process (head, node, driver, and the
``actorrt`` command when it calls the head) presents a certificate signed by the cluster's CA and
accepts only peers that do: servers require client certificates, and clients check that the
server's certificate names the address they dialled, so a certificate must name every address
its process serves on (its subject alternative names). The cluster token is still checked on every
call: the certificate says a peer is one of the CA's, the token that it is one of this cluster's.

The files come from ``actorrt start --tls-cert/--tls-key/--tls-ca`` or from ``ACTORRT_TLS_CERT``,
``ACTORRT_TLS_KEY`` and ``ACTORRT_TLS_CA``, which the processes a head or the CLI starts inherit.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from actorrt.exceptions import ClusterError
from actorrt.store.tls import StoreTls

if TYPE_CHECKING:
    from cryptography import x509

# ``cryptography`` is imported where files are checked, not above: a process without TLS never
# pays for it.

CERT_ENV = "ACTORRT_TLS_CERT"
KEY_ENV = "ACTORRT_TLS_KEY"
CA_ENV = "ACTORRT_TLS_CA"
ENV_NAMES = {"cert": CERT_ENV, "key": KEY_ENV, "ca": CA_ENV}
_WHAT = {"cert": "the TLS certificate", "key": "the TLS key", "ca": "the TLS CA"}


@dataclass(frozen=True)
class TlsFiles:
    """A process's certificate and its key, and the CA every peer's certificate must be signed by
    (PEM files; the certificate file may hold intermediates after it).

    Made by ``given`` or ``from_env``, which check the files at once: a missing, unreadable or
    mismatched file stops a process at its start, not at its first connection.
    """

    cert: Path
    key: Path
    ca: Path

    @classmethod
    def given(cls, cert: str | Path | None, key: str | Path | None, ca: str | Path | None,
              names: Mapping[str, str] = ENV_NAMES) -> TlsFiles | None:
        """The files, checked; None when none is given. ``names`` say where each comes from, for
        the errors (the variables, or the command's options)."""
        values = {"cert": cert, "key": key, "ca": ca}
        missing = [names[k] for k, v in values.items() if not v]
        if len(missing) == len(values):
            return None
        if missing:
            given = [names[k] for k, v in values.items() if v]
            raise ClusterError(f"TLS needs a certificate, its key and the CA: {', '.join(given)} given, "
                               f"{', '.join(missing)} missing")
        # Absolute: processes started elsewhere (a head's nodes) read them too.
        files = cls(*(Path(v).absolute() for v in values.values()))
        files._check()
        return files

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TlsFiles | None:
        """The files ``ACTORRT_TLS_*`` name (in ``os.environ`` by default), checked; None if unset."""
        environ = os.environ if environ is None else environ
        return cls.given(*(environ.get(name) for name in ENV_NAMES.values()))

    def env(self) -> dict[str, str]:
        """The variables that hand these files to a child process."""
        return {ENV_NAMES[k]: str(getattr(self, k)) for k in ENV_NAMES}

    def for_store(self) -> StoreTls:
        """The same files for the lineage store's Redis servers (see ``actorrt.store.tls``)."""
        return StoreTls(self.ca, self.cert, self.key)

    def check_names(self, host: str) -> None:
        """Raise ClusterError unless the certificate names ``host``: peers dial this process at the
        address it binds, and refuse a certificate that does not name it."""
        names = self._names()
        try:
            ip = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            named = any(_dns_match(pattern, host) for pattern in names if isinstance(pattern, str))
        else:
            named = ip in names
        if not named:
            listed = ", ".join(map(str, names)) or "no address"
            raise ClusterError(f"{_WHAT['cert']} {self.cert} does not name {host}, the address this process serves "
                               f"on (it names {listed}): peers would refuse it; its subject alternative names must "
                               "list every address of the cluster (`actorrt tls-certs --host ...` makes such one)")

    def server_credentials(self) -> grpc.ServerCredentials:
        """A gRPC server's: its certificate, and a client certificate required, signed by the CA."""
        cert, key, ca = self._pem
        return grpc.ssl_server_credentials(((key, cert),), root_certificates=ca, require_client_auth=True)

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """A gRPC channel's: servers checked against the CA (and the dialled name), this process's
        certificate presented."""
        cert, key, ca = self._pem
        return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)

    @functools.cached_property
    def server_context(self) -> ssl.SSLContext:
        """The transfer server's: a puller without a certificate signed by the CA fails the handshake."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.verify_mode = ssl.CERT_REQUIRED
        return self._load(context)

    @functools.cached_property
    def client_context(self) -> ssl.SSLContext:
        """A puller's: the holder's certificate checked against the CA and the address dialled."""
        return self._load(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))  # verifies and checks names by default

    # ---- reading and checking the files (once per process: cached) ------------------------------

    @functools.cached_property
    def _pem(self) -> tuple[bytes, bytes, bytes]:
        out = []
        for k in ("cert", "key", "ca"):
            path = getattr(self, k)
            try:
                out.append(path.read_bytes())
            except OSError as exc:
                raise ClusterError(f"{_WHAT[k]} {path} cannot be read: {exc.strerror or exc}") from None
        return out[0], out[1], out[2]

    def _load(self, context: ssl.SSLContext) -> ssl.SSLContext:
        context.load_verify_locations(cadata=self._pem[2].decode("ascii", "replace"))
        try:
            context.load_cert_chain(self.cert, self.key)
        except ssl.SSLError as exc:  # both parsed already (_check): they do not belong together
            raise ClusterError(f"{_WHAT['key']} {self.key} is not the key of {_WHAT['cert']} {self.cert}: "
                               f"{exc.reason or exc}") from None
        return context

    def _check(self) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        cert, key, ca = self._pem
        chain, cas = _certificates(cert, "cert", self.cert), _certificates(ca, "ca", self.ca)
        try:
            load_pem_private_key(key, password=None)
        except (ValueError, TypeError) as exc:
            raise ClusterError(f"{_WHAT['key']} {self.key} is not an unencrypted PEM private key: {exc}") from None
        leaf, now = chain[0], datetime.now(UTC)
        if not leaf.not_valid_before_utc <= now <= leaf.not_valid_after_utc:
            raise ClusterError(f"{_WHAT['cert']} {self.cert} is valid from {leaf.not_valid_before_utc:%Y-%m-%d %H:%M} "
                               f"to {leaf.not_valid_after_utc:%Y-%m-%d %H:%M} UTC, not now")
        if not any(_issued_by(chain[-1], issuer) for issuer in cas):
            raise ClusterError(f"{_WHAT['cert']} {self.cert} is not signed by {_WHAT['ca']} {self.ca}: "
                               "peers would refuse it")
        try:
            leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        except x509.ExtensionNotFound:
            raise ClusterError(f"{_WHAT['cert']} {self.cert} names no address (no subject alternative names): "
                               "peers would refuse it") from None
        # Loaded now, so that a key of another certificate fails here.
        _ = self.server_context, self.client_context

    def _names(self) -> list[str | ipaddress.IPv4Address | ipaddress.IPv6Address]:
        from cryptography import x509

        leaf = _certificates(self._pem[0], "cert", self.cert)[0]
        san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        return [*san.get_values_for_type(x509.IPAddress), *san.get_values_for_type(x509.DNSName)]


def _certificates(pem: bytes, kind: str, path: Path) -> list[x509.Certificate]:
    from cryptography import x509

    try:
        return x509.load_pem_x509_certificates(pem)
    except ValueError:
        raise ClusterError(f"{_WHAT[kind]} {path} holds no PEM certificate") from None


def _issued_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    from cryptography.exceptions import InvalidSignature

    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _dns_match(pattern: str, host: str) -> bool:
    """A DNS name of a certificate against a host name: exact, or ``*.`` for one leftmost label."""
    pattern, host = pattern.lower().rstrip("."), host.lower().rstrip(".")
    if pattern.startswith("*."):
        label, _, rest = host.partition(".")
        return bool(label) and rest == pattern[2:]
    return pattern == host
