"""The ``actorrt`` command against real processes: start a head, drive it from another process,
add a node, reject a wrong token, stop everything."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from actorrt.store.redis_server import _free_port
from actorrt.util.processes import process_alive

REPO = Path(__file__).parents[2]

# Run as a separate process so the driver is a client of the CLI's cluster, not of this test.
DRIVER = """
import os
import sys

import actorrt


@actorrt.remote
class Counter:
    def __init__(self, start):
        self.n = start

    def add(self, k):
        self.n += k
        return self.n

    def hash_seed(self):
        return os.environ.get("PYTHONHASHSEED")


address, slots = sys.argv[1], [int(s) for s in sys.argv[2].split(",")]
try:
    actorrt.init(address=address, timeout=20)
except actorrt.ClusterError as exc:
    print("CLUSTER_ERROR", exc, flush=True)
    sys.exit(3)
counters = {s: Counter.options(node=s).remote(10 * s) for s in slots}
refs = {s: [c.add.remote(1), c.add.remote(2)] for s, c in counters.items()}
for s, r in refs.items():
    assert counters[s].slot == s, counters[s]
    got = actorrt.get(r, timeout=20)
    assert got == [10 * s + 1, 10 * s + 3], (s, got)
    # Every node hashes strings alike, however it was started, so replays iterate sets alike.
    assert actorrt.get(counters[s].hash_seed.remote(), timeout=20) == "0", s
print("DRIVER_OK", ",".join(map(str, slots)), flush=True)
actorrt.shutdown()
"""


def _wait_gone(pids: set[int], timeout: float) -> set[int]:
    """The pids still alive after up to ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while (left := {p for p in pids if process_alive(p)}) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@dataclass
class Cluster:
    env: dict[str, str]
    session_dir: Path
    pids: set[int] = field(default_factory=set)  # everything to kill if the test fails

    def cli(self, *args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "actorrt", *args], env=env or self.env,
                              capture_output=True, text=True, timeout=timeout)

    def session(self) -> dict | None:
        try:
            return json.loads((self.session_dir / "session.json").read_text())
        except FileNotFoundError:
            return None

    def status(self) -> list[dict[str, str]]:
        """The node rows of ``actorrt status``."""
        out = self.cli("status")
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        header = next(line for line in lines if line.startswith("SLOT")).lower().split()
        rows = [line.split(maxsplit=len(header) - 1) for line in lines if line[:1].isdigit()]
        return [dict(zip(header, row, strict=True)) for row in rows if len(row) == len(header)]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    env = dict(os.environ, ACTORRT_SESSION_DIR=str(tmp_path / "session"))
    env.pop("ACTORRT_TOKEN", None)
    c = Cluster(env, tmp_path / "session")
    try:
        yield c
    finally:
        if (found := c.session()) is not None:
            c.pids.add(found["head_pid"])
            with contextlib.suppress(subprocess.TimeoutExpired):
                c.cli("stop", timeout=30)
        for pid in c.pids:
            if process_alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def _drive(c: Cluster, tmp_path: Path, address: str, slots: str,
           token: str | None = None) -> subprocess.CompletedProcess:
    """Run the driver script against ``address`` using nodes ``slots`` (comma-separated)."""
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = dict(c.env, ACTORRT_TOKEN=token) if token else c.env
    return subprocess.run([sys.executable, str(script), address, slots], env=env, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.timeout(120)
def test_cli_cluster_lifecycle(cluster: Cluster, tmp_path: Path) -> None:
    c = cluster
    out = c.cli("start", "--head", "--nodes", "2")
    assert out.returncode == 0, out.stdout + out.stderr
    found = c.session()
    assert found is not None
    address, head_pid = found["head_address"], found["head_pid"]
    c.pids.add(head_pid)
    assert f'actorrt.init(address="{address}")' in out.stdout
    assert str(c.session_dir / "session.json") in out.stdout

    second = c.cli("start", "--head")
    assert second.returncode != 0
    assert "already running" in second.stderr and "Traceback" not in second.stderr

    ran = _drive(c, tmp_path, address, "0,1")
    assert "DRIVER_OK 0,1" in ran.stdout, ran.stdout + ran.stderr
    ran = _drive(c, tmp_path, "auto", "1")  # the head of this machine, from its session file
    assert "DRIVER_OK 1" in ran.stdout, ran.stdout + ran.stderr

    added = c.cli("start", "--address", address)
    assert added.returncode == 0, added.stdout + added.stderr
    assert "Added node 2" in added.stdout
    nodes = c.status()
    c.pids |= {int(n["pid"]) for n in nodes}
    for command in ("status", "start"):  # a node's address where the head's should be, with the token
        out = c.cli(command, "--address", nodes[0]["address"], env=dict(c.env, ACTORRT_TOKEN=found["token"]))
        assert out.returncode == 1 and f"{nodes[0]['address']} is not an actorrt head" in out.stderr, out.stderr
    assert [(n["slot"], n["state"], n["managed"], n["restarts"], n["last_failure"]) for n in nodes] == [
        ("0", "ALIVE", "yes", "0", "-"), ("1", "ALIVE", "yes", "0", "-"), ("2", "ALIVE", "no", "0", "-"),
    ]

    wrong = _drive(c, tmp_path, address, "0", token="not-the-token")
    assert wrong.returncode == 3, wrong.stdout + wrong.stderr
    assert "CLUSTER_ERROR" in wrong.stdout and "rejected" in wrong.stdout

    # The cluster keeps serving after the rejected driver, the added node included.
    ran = _drive(c, tmp_path, address, "0,1,2")
    assert "DRIVER_OK 0,1,2" in ran.stdout, ran.stdout + ran.stderr

    stopped = c.cli("stop")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    managed = {head_pid} | {int(n["pid"]) for n in nodes if n["managed"] == "yes"}
    assert not _wait_gone(managed, 10.0)
    assert c.session() is None
    assert not [*c.session_dir.glob("store-*"), *c.session_dir.glob("logs")]  # what the cluster left is gone
    # The added node is not the head's to stop: the head's last view tells it the cluster stopped
    # (it does not wait out the head grace, two minutes).
    assert not _wait_gone({int(nodes[2]["pid"])}, 5.0)


def test_cli_without_cluster(tmp_path: Path) -> None:
    c = Cluster(dict(os.environ, ACTORRT_SESSION_DIR=str(tmp_path / "none")), tmp_path / "none")
    c.env.pop("ACTORRT_TOKEN", None)
    out = c.cli("stop")
    assert out.returncode == 0 and "nothing to stop" in out.stdout
    out = c.cli("status")
    assert out.returncode == 1 and "no cluster is running" in out.stderr and "Traceback" not in out.stderr
    out = c.cli("start")
    assert out.returncode == 2 and "--head" in out.stderr
    ran = _drive(c, tmp_path, "auto", "0")
    assert ran.returncode == 3 and "no cluster runs on this machine" in ran.stdout, ran.stdout + ran.stderr
    ran = _drive(c, tmp_path, "127.0.0.1:1", "0")  # nothing listens there
    assert ran.returncode == 3 and "no head answers at 127.0.0.1:1" in ran.stdout, ran.stdout + ran.stderr
    for command in ("status", "stop", "start"):  # an address where no head runs, or no address at all
        out = c.cli(command, "--address", "127.0.0.1:1")
        assert out.returncode == 1 and "no head answers at 127.0.0.1:1" in out.stderr, out.stderr
        out = c.cli(command, "--address", "headhost")
        assert out.returncode == 2 and "address must be HOST:PORT" in out.stderr, out.stderr


def test_an_embedded_driver_stopped_by_sigterm_stops_its_cluster_and_removes_its_session_directory(tmp_path: Path):
    script = tmp_path / "embedded.py"
    script.write_text("import time, actorrt\n"
                      "from actorrt.core import context\n"
                      "actorrt.init(num_nodes=1, store_shards=1)\n"
                      "head = context.current().head_process\n"
                      "print(head.session.session_dir, head.process.pid, flush=True)\n"
                      "time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        session_dir, head_pid = proc.stdout.readline().split()
        assert Path(session_dir).is_dir()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == -signal.SIGTERM  # ended by the signal, as without actorrt
        assert not Path(session_dir).exists()
        assert not _wait_gone({int(head_pid)}, 10.0)
    finally:
        if proc.poll() is None:
            proc.kill()


STREAMING_DRIVER = """
import sys
import time
from pathlib import Path

import actorrt
from actorrt.streaming import Dataflow

@actorrt.remote
class Pinger:
    def ping(self):
        return "pong"


actorrt.init(address="auto", timeout=20)
pinger = Pinger.options(name="pinger").remote()
assert actorrt.get(pinger.ping.remote(), timeout=20) == "pong"
flow = Dataflow("wordcount", batch_size=20)
flow.source(f"a b c{i % 5}" for i in range(3000)).flat_map(str.split, parallelism=2).key_by(
    lambda w: w).fold(lambda: 0, lambda n, w: n + 1, parallelism=2, name="count").collect()
result = flow.run(timeout=60)
print("FLOW_DONE", len(result.outputs), flush=True)
while not Path(sys.argv[1]).exists():  # the operators live while this driver does
    time.sleep(0.05)
actorrt.shutdown()
"""


@pytest.mark.timeout(120)
def test_status_and_the_metrics_endpoint_show_what_stream_operators_publish(cluster: Cluster, tmp_path: Path):
    c = cluster
    port = _free_port("127.0.0.1")
    url = f"http://127.0.0.1:{port}/metrics"
    # The script, as a newcomer runs it after the README's first command: the .venv not activated.
    python_dir = os.path.dirname(sys.executable)
    bare = dict(c.env, NODES="2", SHARDS="1",
                PATH=os.pathsep.join(p for p in c.env["PATH"].split(os.pathsep) if p != python_dir))
    out = subprocess.run(["bash", str(REPO / "scripts" / "start-cluster.sh"), "--metrics-port", str(port)], env=bare,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    c.pids.add(c.session()["head_pid"])
    assert f"metrics:      {url}" in out.stdout and c.session()["metrics_url"] == url  # where to point Prometheus
    script, release = tmp_path / "stream.py", tmp_path / "release"
    script.write_text(STREAMING_DRIVER)
    driver = subprocess.Popen([sys.executable, str(script), str(release)], env=c.env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert "FLOW_DONE" in driver.stdout.readline()
        # Stats reach the head with the nodes' heartbeats.
        deadline = time.monotonic() + 20
        while "wordcount/2 count#1" not in (status := c.cli("status").stdout):
            assert time.monotonic() < deadline, status
            time.sleep(0.2)
        assert "actors that publish metrics:" in status and "records_in=" in status
        assert f"Prometheus metrics on {url}" in status
        counted = [line for line in status.splitlines() if "wordcount/2 count#" in line]
        assert len(counted) == 2 and all("latency_p50_ms=" in line for line in counted)
        scraped = urllib.request.urlopen(url, timeout=10).read().decode()
        assert any(line.startswith("actorrt_actor_executed") and 'name="pinger"' in line and 'class_name="Pinger"'
                   in line for line in scraped.splitlines()), scraped  # by its name, not its ID alone
        ins = [float(line.rsplit(" ", 1)[1]) for line in scraped.splitlines()
               if line.startswith("actorrt_actor_records_in{") and 'label="wordcount/2 count#' in line]
        assert sum(ins) == 3000 * 3  # every word reached a counting operator once
        assert "actorrt_nodes_alive 2.0" in scraped
    finally:
        release.touch()
        driver.wait(timeout=30)
