"""Mutual TLS against real processes. A cluster started with certificates (the head and a node of
another host by ``actorrt start``, the driver from the environment) serves actor calls and large
objects across hosts, the bytes on the transfer streams; clients without a certificate of its CA,
over gRPC or on a transfer stream, are refused, and it goes on serving; incomplete or bad settings
stop a process at its start with an error that says what is wrong. ("Another host": a node under
another host identity, as in test_collective_hosts.py, so objects reach it as pulled bytes.)"""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import struct
import subprocess
import sys
import textwrap
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import grpc
import numpy as np
import pytest
import redis

import actorrt
from actorrt import collective
from actorrt.cluster import session
from actorrt.cluster.certs import make_certs
from actorrt.core import context
from actorrt.net.auth import metadata
from actorrt.net.tls import ENV_NAMES, TlsFiles
from actorrt.rpc import common_pb2, head_pb2, head_pb2_grpc, node_pb2, node_pb2_grpc
from tests.support.http import fetch
from tests.support.listening import ANY, listening_address

MB = 1 << 20
OTHER_HOST = "elsewhere"


@actorrt.remote
class Worker:
    def total(self, x):
        return float(x.sum())

    def make(self, nbytes, fill):
        return np.full(nbytes // 8, fill)

    def add(self, k):
        return k + 1

    async def relay(self, other, k):
        return await other.add.remote(k)


@actorrt.remote
class Member:
    def __init__(self):
        self.n = 0

    async def allreduce(self, array):
        return await collective.allreduce(array)

    def pulled(self):
        return collective.stats()["pulled_bytes"]

    def add(self, k):
        self.n += k
        return self.n


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> tuple[Path, Path]:
    """The cluster's CA and certificate, and those of another CA."""
    root = tmp_path_factory.mktemp("certs")
    make_certs(root / "cluster", ["127.0.0.1", "localhost"])
    make_certs(root / "other", ["127.0.0.1", "localhost"])
    return root / "cluster", root / "other"


def _flags(d: Path, cert: str = "cert.pem", key: str = "key.pem", ca: str = "ca.pem") -> list[str]:
    return ["--tls-cert", str(d / cert), "--tls-key", str(d / key), "--tls-ca", str(d / ca)]


def _tls_env(d: Path, ca: Path | None = None) -> dict[str, str]:
    """The variables that give a process the certificate and key in ``d``, and its CA (or ``ca``)."""
    return TlsFiles(d / "cert.pem", d / "key.pem", ca or d / "ca.pem").env()


def _clean_env(**extra: str) -> dict[str, str]:
    """This environment without any TLS settings or token (each test gives its own)."""
    env = {k: v for k, v in os.environ.items() if k not in ENV_NAMES.values() and k != session.TOKEN_ENV}
    return dict(env, PYTHONPATH=os.pathsep.join(sys.path), **extra)


def _actorrt(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "actorrt", *args], capture_output=True, text=True, timeout=120,
                          env=env or _clean_env())


@pytest.fixture(scope="module")
def tls_cluster(certs, tmp_path_factory):
    """A TLS cluster: a head with one node, a node of another host added by hand, and this process
    as its driver (TLS files and token from the environment), its dashboard open beyond loopback.
    Yields its session."""
    d = certs[0]
    session_dir = tmp_path_factory.mktemp("session")
    started = _actorrt("start", "--head", "--nodes", "1", "--store-shards", "1", "--session-dir", str(session_dir),
                       "--dashboard-port", "0", "--dashboard-host", "0.0.0.0", *_flags(d))
    assert started.returncode == 0, started.stdout + started.stderr
    found = session.read(session_dir)
    other_node = None
    try:
        added = _actorrt("start", "--address", found.head_address, "--session-dir", str(session_dir), *_flags(d),
                         env=_clean_env(ACTORRT_HOST_ID=OTHER_HOST))
        assert added.returncode == 0, added.stdout + added.stderr
        with pytest.MonkeyPatch.context() as env:
            for name, value in _tls_env(d).items():
                env.setenv(name, value)
            env.setenv(session.TOKEN_ENV, found.token)
            actorrt.init(address=found.head_address, timeout=30)
            other_node = next(n["pid"] for n in actorrt.nodes() if n["host_id"] == OTHER_HOST)
            try:
                yield found
            finally:
                actorrt.shutdown()
    finally:
        stopped = _actorrt("stop", "--session-dir", str(session_dir), *_flags(d))
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        if other_node is not None:  # it would exit by itself a few seconds after the head
            os.kill(other_node, signal.SIGKILL)


def _slots() -> tuple[int, int]:
    """This host's node slot and the other host's."""
    hosts = {n["node"]: n["host_id"] for n in actorrt.nodes() if n["state"] == "ALIVE"}
    return next(s for s, h in hosts.items() if h != OTHER_HOST), next(s for s, h in hosts.items() if h == OTHER_HOST)


def _credentials(d: Path, ca: Path | None = None, client_cert: bool = True) -> grpc.ChannelCredentials:
    if not client_cert:
        return grpc.ssl_channel_credentials(root_certificates=(ca or d / "ca.pem").read_bytes())
    return grpc.ssl_channel_credentials(root_certificates=(ca or d / "ca.pem").read_bytes(),
                                        private_key=(d / "key.pem").read_bytes(),
                                        certificate_chain=(d / "cert.pem").read_bytes())


def _cluster_stats(chan: grpc.Channel, token: str) -> head_pb2.ClusterStatsReply:
    return head_pb2_grpc.HeadStub(chan).ClusterStats(head_pb2.ClusterStatsRequest(), metadata=metadata(token),
                                                     timeout=10)


def _still_serving(found: session.Session, d: Path) -> None:
    """A client with the cluster's certificate is served, and so are actor calls across hosts."""
    with grpc.secure_channel(found.head_address, _credentials(d)) as chan:
        assert len(_cluster_stats(chan, found.token).view.nodes) == 2
    near, far = (Worker.options(node=s).remote() for s in _slots())
    assert actorrt.get(near.relay.remote(far, 1), timeout=30) == 2


def test_actor_calls_and_large_objects_cross_hosts_over_tls(tls_cluster):
    near_slot, far_slot = _slots()
    near, far = Worker.options(node=near_slot).remote(), Worker.options(node=far_slot).remote()
    assert actorrt.get(near.relay.remote(far, 1), timeout=30) == 2  # on the peer stream between the nodes
    transfers = context.current().worker.traffic.transfers
    array = np.arange(8 * MB // 8, dtype=np.float64)
    before = transfers.sent_bytes
    assert actorrt.get(far.total.remote(array), timeout=60) == float(array.sum())
    assert transfers.sent_bytes - before >= array.nbytes  # the other host pulled it from this driver
    made = actorrt.get(far.make.remote(8 * MB, 2.5), timeout=60)  # pulled here from the other host
    assert made.shape == (MB,) and float(made.sum()) == 2.5 * MB
    assert actorrt.get(near.total.remote(far.make.remote(8 * MB, 1.5)), timeout=60) == 1.5 * MB


def test_a_collective_across_hosts_over_tls_equals_numpy(tls_cluster):
    members = [Member.options(node=slot).remote() for slot in _slots()]
    collective.create_collective_group(members)
    arrays = [np.random.default_rng(r).standard_normal(MB, np.float32) for r in range(2)]
    got = actorrt.get([m.allreduce.remote(a) for m, a in zip(members, arrays, strict=True)], timeout=60)
    assert all(g.tobytes() == (arrays[0] + arrays[1]).tobytes() for g in got)
    assert all(actorrt.get(m.pulled.remote(), timeout=30) > 0 for m in members)  # slices crossed on TLS


def test_a_node_the_head_restarts_rejoins_in_tls_and_replays(tls_cluster):
    near_slot, far_slot = _slots()
    counter, far = Member.options(node=near_slot).remote(), Worker.options(node=far_slot).remote()
    assert actorrt.get([counter.add.remote(1) for _ in range(3)], timeout=30) == [1, 2, 3]
    actorrt.kill_node(near_slot)  # the head restarts it with its TLS files; survivors flush to it over TLS
    assert actorrt.get(counter.add.remote(1), timeout=60) == 4
    assert actorrt.get(far.relay.remote(counter, 1), timeout=60) == 5


def test_a_plaintext_client_with_the_token_is_refused(tls_cluster, certs):
    node = actorrt.nodes()[0]["address"]
    with grpc.insecure_channel(tls_cluster.head_address) as chan, pytest.raises(grpc.RpcError) as info:
        _cluster_stats(chan, tls_cluster.token)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    with grpc.insecure_channel(node) as chan, pytest.raises(grpc.RpcError) as info:
        node_pb2_grpc.NodeStub(chan).Stats(node_pb2.NodeStatsRequest(), metadata=metadata(tls_cluster.token),
                                           timeout=10)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    _still_serving(tls_cluster, certs[0])


def test_the_clusters_own_store_shards_serve_tls_only(tls_cluster, certs):
    with grpc.secure_channel(tls_cluster.head_address, _credentials(certs[0])) as chan:
        view = _cluster_stats(chan, tls_cluster.token).view
    assert view.store_tls and len(view.store_shards) == 1
    host, _, port = view.store_shards[0].address.rpartition(":")
    files = TlsFiles(certs[0] / "cert.pem", certs[0] / "key.pem", certs[0] / "ca.pem").for_store()
    with redis.Redis(host=host, port=int(port), password=view.store_password, **files.redis_kwargs()) as client:
        assert client.dbsize() > 0  # the cluster's state and lineage, written over TLS
    with redis.Redis(host=host, port=int(port), password=view.store_password, socket_timeout=2) as plaintext, \
            pytest.raises((redis.ConnectionError, redis.TimeoutError)):
        plaintext.ping()


def test_the_dashboard_beyond_loopback_serves_https_with_the_cluster_certificate(tls_cluster, certs):
    url = urllib.parse.urlsplit(tls_cluster.dashboard_url)
    assert url.scheme == "https" and listening_address(url.port) == ANY  # beyond loopback, as asked
    context = ssl.create_default_context(cafile=str(certs[0] / "ca.pem"))  # no client certificate: a browser
    request = urllib.request.Request(f"https://127.0.0.1:{url.port}/api/snapshot",
                                     headers={"Authorization": f"Bearer {tls_cluster.token}"})
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        assert response.status == 200 and len(json.load(response)["cluster"]["nodes"]) == 2
    status, headers, _ = fetch(f"https://127.0.0.1:{url.port}/login", data=f"token={tls_cluster.token}".encode(),
                               context=context)
    assert status == 303 and "Secure" in headers["Set-Cookie"]  # the cookie travels on HTTPS only
    with pytest.raises((urllib.error.URLError, ConnectionError)):  # never in plain HTTP
        urllib.request.urlopen(f"http://127.0.0.1:{url.port}/api/snapshot", timeout=10)
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):  # another CA's client
        urllib.request.urlopen(request, context=ssl.create_default_context(cafile=str(certs[1] / "ca.pem")),
                               timeout=10)


@pytest.mark.parametrize("client", ["certificate of another CA", "no certificate", "server not trusted"])
def test_a_client_without_a_certificate_of_the_ca_is_refused(tls_cluster, certs, client):
    d, other = certs
    credentials = {"certificate of another CA": _credentials(other, ca=d / "ca.pem"),
                   "no certificate": _credentials(d, client_cert=False),
                   "server not trusted": _credentials(d, ca=other / "ca.pem")}[client]
    with grpc.secure_channel(tls_cluster.head_address, credentials) as chan, pytest.raises(grpc.RpcError) as info:
        _cluster_stats(chan, tls_cluster.token)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    _still_serving(tls_cluster, certs[0])


def test_a_transfer_stream_without_a_client_certificate_is_refused(tls_cluster, certs):
    d, other = certs
    address = context.current().worker.shared.data_address  # this driver's transfer server
    host, _, port = address.rpartition(":")
    request = common_pb2.SharedPull(token=tls_cluster.token, shared=common_pb2.SharedObject(data_address=address))
    framed = struct.pack("!I", request.ByteSize()) + request.SerializeToString()
    not_held = struct.pack("!I", 0)  # the answer to a pull of something the server does not hold

    def answer(tls: ssl.SSLContext | None) -> bytes | None:
        """The server's answer to the pull, over TLS with ``tls`` or in plaintext; None if none came."""
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            conn = tls.wrap_socket(raw, server_hostname=host) if tls is not None else raw
            got = b""
            try:
                conn.sendall(framed)
                while len(got) < 4 and (chunk := conn.recv(4 - len(got))):
                    got += chunk
            except (ssl.SSLError, ConnectionError):
                return None
            return got if len(got) == 4 else None

    def context_of(ca: Path, cert_dir: Path | None) -> ssl.SSLContext:
        tls = ssl.create_default_context(cafile=ca)
        if cert_dir is not None:
            tls.load_cert_chain(cert_dir / "cert.pem", cert_dir / "key.pem")
        return tls

    assert answer(context_of(d / "ca.pem", d)) == not_held
    for refused in (context_of(d / "ca.pem", None), context_of(d / "ca.pem", other), None):
        assert answer(refused) is None
    assert answer(context_of(d / "ca.pem", d)) == not_held
    _still_serving(tls_cluster, d)


EMBEDDED = textwrap.dedent("""
    import grpc

    import actorrt
    from actorrt.core import context
    from actorrt.rpc import head_pb2, head_pb2_grpc


    @actorrt.remote
    class Echo:
        def echo(self, x):
            return x


    actorrt.init(num_nodes=2, store_shards=1)
    a, b = Echo.options(node=0).remote(), Echo.options(node=1).remote()
    assert actorrt.get([a.echo.remote(1), b.echo.remote(b"x" * 200_000)], timeout=30) == [1, b"x" * 200_000]
    with grpc.insecure_channel(context.current().head_address) as chan:
        try:
            head_pb2_grpc.HeadStub(chan).ClusterStats(head_pb2.ClusterStatsRequest(), timeout=10)
        except grpc.RpcError as exc:
            print("PLAINTEXT_REFUSED", exc.code().name)
    actorrt.shutdown()
    print("EMBEDDED_OK")
""")


def test_an_embedded_cluster_takes_tls_from_the_environment(certs, tmp_path):
    d = certs[0]
    env = _clean_env(**_tls_env(d))
    ran = subprocess.run([sys.executable, "-c", EMBEDDED], capture_output=True, text=True, timeout=120, env=env)
    assert "PLAINTEXT_REFUSED UNAVAILABLE" in ran.stdout and "EMBEDDED_OK" in ran.stdout, ran.stdout + ran.stderr


# ---- incomplete or bad settings: a clear error at the start ------------------------------------


def test_a_partial_set_of_options_or_variables_names_what_is_missing(certs, tmp_path):
    d = certs[0]
    out = _actorrt("start", "--head", "--session-dir", str(tmp_path), "--tls-cert", str(d / "cert.pem"))
    assert out.returncode != 0 and "--tls-key" in out.stderr and "--tls-ca" in out.stderr, out.stderr
    assert "--tls-cert" in out.stderr.split("given")[0], out.stderr
    out = _actorrt("start", "--head", "--session-dir", str(tmp_path), env=_clean_env(ACTORRT_TLS_CA=str(d / "ca.pem")))
    assert out.returncode != 0 and "ACTORRT_TLS_CERT" in out.stderr and "ACTORRT_TLS_KEY" in out.stderr, out.stderr


@pytest.mark.parametrize("module", ["actorrt.cluster.run_head", "actorrt.cluster.node"])
def test_a_head_or_node_process_with_partial_tls_variables_exits_saying_so(certs, tmp_path, module):
    args = ["--session-dir", str(tmp_path)] if module.endswith("head") else ["--head", "127.0.0.1:9"]
    env = _clean_env(ACTORRT_TOKEN="t", ACTORRT_TLS_KEY=str(certs[0] / "key.pem"))
    out = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode != 0, out.stdout + out.stderr
    assert "ACTORRT_TLS_CERT" in out.stderr and "ACTORRT_TLS_CA" in out.stderr and "missing" in out.stderr, out.stderr


@pytest.mark.parametrize("case,expected", [
    ("missing", "cannot be read"),
    ("not a certificate", "holds no PEM certificate"),
    ("key of another certificate", "is not the key of"),
    ("another CA", "is not signed by"),
    ("host not named", "does not name 127.0.0.2"),
])
def test_bad_tls_files_stop_actorrt_start_with_a_clear_error(certs, tmp_path, case, expected):
    d, other = certs
    flags = {"missing": _flags(d, cert="nope.pem"), "not a certificate": _flags(d, cert="key.pem"),
             "key of another certificate": _flags(d)[:2] + ["--tls-key", str(other / "key.pem"), *_flags(d)[4:]],
             "another CA": _flags(d)[:4] + ["--tls-ca", str(other / "ca.pem")],
             "host not named": [*_flags(d), "--host", "127.0.0.2"]}[case]
    out = _actorrt("start", "--head", "--session-dir", str(tmp_path), *flags)
    assert out.returncode != 0 and expected in out.stderr, out.stdout + out.stderr
    assert session.read(tmp_path) is None  # nothing started


DRIVER = textwrap.dedent("""
    import actorrt

    for address in ("127.0.0.1:9", None):  # a cluster's address (nothing there), and an embedded cluster
        try:
            actorrt.init(address=address, timeout=10)
        except actorrt.ClusterError as exc:
            print("REFUSED", exc)
""")


@pytest.mark.parametrize("case,expected", [("partial", "ACTORRT_TLS_KEY, ACTORRT_TLS_CA missing"),
                                           ("another CA", "is not signed by")])
def test_a_driver_with_partial_or_bad_tls_variables_fails_before_connecting(certs, case, expected):
    d, other = certs
    env = {"partial": {"ACTORRT_TLS_CERT": str(d / "cert.pem")}, "another CA": _tls_env(d, ca=other / "ca.pem")}[case]
    ran = subprocess.run([sys.executable, "-c", DRIVER], capture_output=True, text=True, timeout=60,
                         env=_clean_env(**env))
    refusals = [line for line in ran.stdout.splitlines() if line.startswith("REFUSED")]
    assert len(refusals) == 2 and all(expected in line for line in refusals), ran.stdout + ran.stderr
