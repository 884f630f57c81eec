"""TLS settings and certificates without a cluster: all three files or none, each checked at once
with an error that names it; the names a certificate serves; what ``actorrt tls-certs`` writes."""

from __future__ import annotations

import ssl
import stat
from pathlib import Path

import grpc
import pytest
from click.testing import CliRunner
from cryptography import x509

from actorrt.cluster.certs import make_certs
from actorrt.cluster.cli import cli
from actorrt.exceptions import ClusterError
from actorrt.net.tls import TlsFiles


@pytest.fixture(scope="module")
def cas(tmp_path_factory) -> tuple[Path, Path]:
    """Two CAs, each with a certificate for 127.0.0.1, ::1 and localhost."""
    root = tmp_path_factory.mktemp("certs")
    for name in ("one", "two"):
        make_certs(root / name, ["127.0.0.1", "::1", "localhost"])
    return root / "one", root / "two"


def files(d: Path, cert: str = "cert.pem", key: str = "key.pem", ca: str = "ca.pem") -> tuple[Path, Path, Path]:
    return d / cert, d / key, d / ca


def test_no_settings_is_plaintext_and_a_partial_set_names_what_is_missing(cas):
    cert, key, ca = files(cas[0])
    assert TlsFiles.given(None, None, None) is None
    assert TlsFiles.from_env({}) is None
    with pytest.raises(ClusterError, match="ACTORRT_TLS_CERT given, ACTORRT_TLS_KEY, ACTORRT_TLS_CA missing"):
        TlsFiles.from_env({"ACTORRT_TLS_CERT": str(cert)})
    with pytest.raises(ClusterError, match="--key given, --cert, --ca missing"):
        TlsFiles.given(None, key, "", names={"cert": "--cert", "key": "--key", "ca": "--ca"})


def test_the_files_travel_as_absolute_paths_in_the_environment(cas, monkeypatch):
    monkeypatch.chdir(cas[0].parent)
    tls = TlsFiles.given(*(Path(cas[0].name) / p.name for p in files(cas[0])))
    assert tls == TlsFiles(*files(cas[0]))
    assert TlsFiles.from_env(tls.env()) == tls


@pytest.mark.parametrize("case,expected", [
    ("missing", "the TLS certificate .*nope.pem cannot be read: No such file"),
    ("not a certificate", "the TLS certificate .*key.pem holds no PEM certificate"),
    ("not a key", "the TLS key .*cert.pem is not an unencrypted PEM private key"),
    ("CA not a certificate", "the TLS CA .*key.pem holds no PEM certificate"),
    ("key of another certificate", "the TLS key .*two/key.pem is not the key of the TLS certificate"),
    ("another CA", "the TLS certificate .*one/cert.pem is not signed by the TLS CA .*two/ca.pem"),
])
def test_each_bad_file_is_named_at_once(cas, case, expected):
    one, two = cas
    cert, key, ca = {"missing": files(one, cert="nope.pem"), "not a certificate": files(one, cert="key.pem"),
                     "not a key": files(one, key="cert.pem"), "CA not a certificate": files(one, ca="key.pem"),
                     "key of another certificate": (one / "cert.pem", two / "key.pem", one / "ca.pem"),
                     "another CA": (one / "cert.pem", one / "key.pem", two / "ca.pem")}[case]
    with pytest.raises(ClusterError, match=expected):
        TlsFiles.given(cert, key, ca)


def test_a_certificate_serves_only_the_addresses_it_names(cas):
    tls = TlsFiles.given(*files(cas[0]))
    for host in ("127.0.0.1", "::1", "[::1]", "localhost", "LOCALHOST"):
        tls.check_names(host)
    for host in ("127.0.0.2", "10.0.0.1", "example.com", "0.0.0.0"):
        with pytest.raises(ClusterError, match=f"does not name {host}.*it names 127.0.0.1, ::1, localhost"):
            tls.check_names(host)


def test_a_wildcard_name_covers_one_label(tmp_path):
    make_certs(tmp_path, ["*.cluster.example"])
    tls = TlsFiles.given(*files(tmp_path))
    tls.check_names("node-1.cluster.example")
    for host in ("cluster.example", "a.b.cluster.example"):
        with pytest.raises(ClusterError, match="does not name"):
            tls.check_names(host)


def test_credentials_and_contexts_require_a_peer_certificate(cas):
    tls = TlsFiles.given(*files(cas[0]))
    assert isinstance(tls.server_credentials(), grpc.ServerCredentials)
    assert isinstance(tls.channel_credentials(), grpc.ChannelCredentials)
    assert tls.server_context.verify_mode == ssl.CERT_REQUIRED
    assert tls.client_context.verify_mode == ssl.CERT_REQUIRED and tls.client_context.check_hostname


def test_per_host_certificates_each_name_their_host_and_a_second_run_keeps_the_ca(tmp_path):
    make_certs(tmp_path, ["10.0.0.1"])
    ca = (tmp_path / "ca.pem").read_bytes()
    written = make_certs(tmp_path, ["10.0.0.2", "node-b.example"], per_host=True)
    assert sorted(p.name for p in written) == ["10.0.0.2-key.pem", "10.0.0.2.pem", "node-b.example-key.pem",
                                               "node-b.example.pem"]
    assert (tmp_path / "ca.pem").read_bytes() == ca
    for host in ("10.0.0.2", "node-b.example"):
        tls = TlsFiles.given(tmp_path / f"{host}.pem", tmp_path / f"{host}-key.pem", tmp_path / "ca.pem")
        tls.check_names(host)
        with pytest.raises(ClusterError, match="does not name"):
            tls.check_names("10.0.0.1")
    TlsFiles.given(*files(tmp_path)).check_names("10.0.0.1")  # the first certificate, still valid
    for path in tmp_path.iterdir():
        private = path.name.endswith("key.pem")
        assert stat.S_IMODE(path.stat().st_mode) == (0o600 if private else 0o644), path


def test_the_tls_certs_command_writes_a_usable_set(tmp_path):
    out = CliRunner().invoke(cli, ["tls-certs", "--out", str(tmp_path), "--host", "127.0.0.1", "--host", "node-a",
                                   "--days", "30"])
    assert out.exit_code == 0, out.output
    assert "127.0.0.1, node-a" in out.output
    tls = TlsFiles.given(*files(tmp_path))
    tls.check_names("node-a")
    cert = x509.load_pem_x509_certificate(tls.cert.read_bytes())
    assert (cert.not_valid_after_utc - cert.not_valid_before_utc).days == 30
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(usage) == {x509.oid.ExtendedKeyUsageOID.SERVER_AUTH, x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH}
