"""Certificates for a cluster's mutual TLS: a CA, and keys and certificates signed by it.

Every process of a TLS cluster both serves and connects, so each certificate is made for both
uses, and names the addresses its processes serve on (peers check the address they dial against
its subject alternative names). The CA's key stays beside its certificate: signing again in the
same directory uses the same CA (a host added later), and leaves the certificates handed out valid.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import socket
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_CERT = "ca.pem"
CA_KEY = "ca-key.pem"
CERT = "cert.pem"
KEY = "key.pem"
DEFAULT_DAYS = 365
# Certificates start a little in the past: another host's clock may be behind this one's.
_CLOCK_SKEW = dt.timedelta(minutes=5)
# Each process serves (to its peers) and connects (to theirs) with the same certificate.
_BOTH_ENDS = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]


def local_names() -> list[str]:
    """This machine's names and addresses: loopback, its hostname and what that resolves to."""
    hostname = socket.gethostname()
    names = ["127.0.0.1", "localhost", hostname]
    try:
        names += [info[4][0] for info in socket.getaddrinfo(hostname, None, type=socket.SOCK_STREAM)]
    except OSError:
        pass  # a hostname that does not resolve: the others still serve
    return list(dict.fromkeys(names))


def make_certs(out: Path, hosts: Sequence[str], per_host: bool = False, days: int = DEFAULT_DAYS) -> list[Path]:
    """Write a CA into ``out`` (or use the one there) and a key and certificate signed by it:
    ``cert.pem`` and ``key.pem`` naming every host, or with ``per_host`` ``HOST.pem`` and
    ``HOST-key.pem`` for each. Keys are readable by their owner only. Returns the files written."""
    if not hosts:
        raise ValueError("name at least one host")
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    written: list[Path] = []
    if (out / CA_CERT).exists() and (out / CA_KEY).exists():
        ca_cert = x509.load_pem_x509_certificate((out / CA_CERT).read_bytes())
        ca_key = serialization.load_pem_private_key((out / CA_KEY).read_bytes(), password=None)
    else:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_cert = (_builder("actorrt cluster CA", ca_key, days).issuer_name(_name("actorrt cluster CA"))
                   .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                   .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                                key_encipherment=False, data_encipherment=False, key_agreement=False,
                                                key_cert_sign=True, crl_sign=True, encipher_only=False,
                                                decipher_only=False), critical=True)
                   .sign(ca_key, hashes.SHA256()))
        written += [_write(out / CA_KEY, _key_pem(ca_key), private=True),
                    _write(out / CA_CERT, ca_cert.public_bytes(serialization.Encoding.PEM))]
    for names, stem in ([([h], h) for h in hosts] if per_host else [(hosts, "")]):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (_builder(names[0], key, days).issuer_name(ca_cert.subject)
                .add_extension(x509.SubjectAlternativeName([_general_name(n) for n in names]), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage(_BOTH_ENDS), critical=False)
                .sign(ca_key, hashes.SHA256()))
        written += [_write(out / (f"{stem}-key.pem" if stem else KEY), _key_pem(key), private=True),
                    _write(out / (f"{stem}.pem" if stem else CERT), cert.public_bytes(serialization.Encoding.PEM))]
    return written


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(subject: str, key: ec.EllipticCurvePrivateKey, days: int) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (x509.CertificateBuilder().subject_name(_name(subject)).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _CLOCK_SKEW).not_valid_after(now + dt.timedelta(days=days)))


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name.strip("[]")))
    except ValueError:
        return x509.DNSName(name)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _write(path: Path, data: bytes, private: bool = False) -> Path:
    mode = 0o600 if private else 0o644
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, mode)  # a file that existed keeps its old mode otherwise
    return path
