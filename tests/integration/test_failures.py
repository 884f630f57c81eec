"""Fail-stop node failures: detection, slot restart, and callers' refs resolving after recovery."""

from __future__ import annotations

import logging
import os
import signal
import time

import pytest

import actorrt
from actorrt.testing import children_of
from actorrt.util.processes import process_alive


@actorrt.remote
class Worker:
    def __init__(self):
        self.n = 0

    def inc(self):
        self.n += 1
        return self.n

    def sleep(self, seconds):
        time.sleep(seconds)
        return seconds


def wait_alive(slot, old_epoch, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        node = actorrt.nodes()[slot]
        if node["state"] == "ALIVE" and node["epoch"] > old_epoch:
            return node
        time.sleep(0.05)
    raise AssertionError(f"node {slot} did not come back: {actorrt.nodes()}")


def test_kill_node_is_detected_and_the_slot_restarts(fresh_cluster):
    before = actorrt.nodes()[1]
    t0 = time.monotonic()
    pid = actorrt.kill_node(1)
    noticed = time.monotonic() - t0
    assert pid == before["pid"]
    assert noticed < 1.0, f"the kill was noticed after {noticed:.2f} s"
    assert not process_alive(pid)  # a zombie its parent has not reaped yet is dead too
    after = wait_alive(1, before["epoch"])
    assert after["pid"] != pid and after["address"] != before["address"]


def test_refs_in_flight_on_a_killed_node_resolve_to_the_failure_free_values(fresh_cluster):
    lost = Worker.options(node=1).remote()
    survivor = Worker.options(node=0).remote()
    assert actorrt.get([lost.inc.remote(), survivor.inc.remote()], timeout=30) == [1, 1]
    in_flight = lost.sleep.remote(1.0)  # running when the node dies
    queued = lost.inc.remote()  # waiting behind it
    time.sleep(0.2)
    actorrt.kill_node(1)
    after = lost.inc.remote()  # submitted while the slot is down
    # Survivors do not wait for the recovery.
    assert actorrt.get(survivor.inc.remote(), timeout=30) == 2
    # The actor is rebuilt by replay, and each call counted once: as if nothing had happened.
    assert actorrt.get([in_flight, queued, after], timeout=60) == [1.0, 2, 3]
    assert actorrt.nodes()[1]["epoch"] >= 2  # restarted (again, if a loaded machine stalled it)
    fresh = Worker.options(node=1).remote()
    assert actorrt.get(fresh.inc.remote(), timeout=30) == 1


def test_external_sigkill_is_detected_too(fresh_cluster):
    before = actorrt.nodes()[0]
    a = Worker.options(node=0).remote()
    assert actorrt.get(a.inc.remote(), timeout=30) == 1
    os.kill(before["pid"], signal.SIGKILL)
    assert actorrt.get(a.inc.remote(), timeout=60) == 2
    assert actorrt.nodes()[0]["epoch"] > before["epoch"]


def test_killing_an_unknown_node_is_an_error(fresh_cluster):
    with pytest.raises(ValueError, match="no node 9"):
        actorrt.kill_node(9)


def test_losing_the_cluster_is_one_log_line_and_a_cluster_error_naming_it(fresh_cluster, caplog):
    """The cluster's supervisor dies (the head, nodes and store shards with it): what waits, and
    every later call, fails at once with a ClusterError that names the cause, instead of hanging or
    waiting out the head grace; the loss is logged once."""
    from actorrt.core import context

    a = Worker.options(node=0).remote()
    assert actorrt.get(a.inc.remote(), timeout=30) == 1
    pending = a.sleep.remote(60)
    with caplog.at_level(logging.DEBUG, logger="actorrt"):
        os.kill(context.current().head_process.process.pid, signal.SIGKILL)
        with pytest.raises(actorrt.ClusterError, match="the head at .* is gone .*supervisor.*call actorrt.shutdown"):
            actorrt.get(pending, timeout=10)
        with pytest.raises(actorrt.ClusterError, match="is gone"):  # and new calls fail fast
            actorrt.get(a.inc.remote(), timeout=10)
        time.sleep(3)  # no retry stream after the loss either
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    # The lost stream may be noticed before the supervisor's exit (one "reconnecting" line) or
    # after (none); either way once, and the loss itself is logged once.
    assert sum("reconnecting" in m for m in warnings) <= 1, warnings
    assert sum("is gone" in m for m in warnings) == 1, warnings
    assert sum("lineage store" in m for m in warnings) <= 1, warnings
    assert len(warnings) <= 4, warnings


def test_a_driver_never_follows_a_head_of_another_cluster_on_its_heads_address(fresh_cluster, tmp_path):
    """The head dies and, before its supervisor restarts it, a fresh one (no state of this cluster,
    same port, same token) comes up at its address: the driver refuses it, saying so, instead of
    joining it and failing every call on actors it does not know."""
    from actorrt.cluster import session
    from actorrt.cluster.head_options import HeadOptions
    from actorrt.cluster.launch import start_head
    from actorrt.core import context

    a = Worker.options(node=0).remote()
    assert actorrt.get(a.inc.remote(), timeout=30) == 1
    rt = context.current()
    port = int(rt.head_address.rpartition(":")[2])
    ours = session.read(rt.head_process.session.session_dir)
    os.kill(ours.supervisor_pid, signal.SIGSTOP)  # it would restart the head
    try:
        os.kill(ours.head_pid, signal.SIGKILL)
        while process_alive(ours.head_pid):
            time.sleep(0.05)
        other = start_head(tmp_path / "other", HeadOptions(port=port, nodes=0, store_shards=1), token=rt.token)
        try:
            # Calls to the running actor need no head and go on, until the driver meets the other one.
            with pytest.raises(actorrt.ClusterError, match="serves another cluster .* than the one this process "
                                                           "joined"):
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    actorrt.get(a.inc.remote(), timeout=30)
                    time.sleep(0.05)
        finally:
            other.process.terminate()
            other.wait_stopped()
    finally:
        os.kill(ours.supervisor_pid, signal.SIGKILL)
        os.kill(ours.supervisor_pid, signal.SIGCONT)
        rt.head_process.process.wait()


def test_a_killed_head_takes_its_nodes_and_store_shards_with_it(cluster_with):
    with cluster_with(num_nodes=2, store_shards=2):
        rt = actorrt.core.context.current()
        children = [n["pid"] for n in actorrt.nodes()] + [s.pid for s in rt.worker.membership.view.store_shards]
        assert all(children) and all(process_alive(pid) for pid in children)
        os.kill(rt.head_process.process.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while any(process_alive(pid) for pid in children):
            assert time.monotonic() < deadline, [pid for pid in children if process_alive(pid)]
            time.sleep(0.05)


def _spares(head_pid: int) -> list[int]:
    """The head's children started as warm node processes (with --spare) that serve no slot yet."""
    serving = {n["pid"] for n in actorrt.nodes()}
    found = []
    for pid in children_of(head_pid) - serving:
        try:
            if b"--spare" in open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0"):
                found.append(pid)
        except OSError:
            continue  # exited meanwhile
    return found


def test_a_restart_takes_the_warm_node_process_and_shutdown_leaves_none(cluster_with):
    with cluster_with(num_nodes=2, store_shards=1):
        head_pid = actorrt.core.context.current().head_process.process.pid
        deadline = time.monotonic() + 10
        while not _spares(head_pid):
            assert time.monotonic() < deadline, "no warm node process"
            time.sleep(0.05)
        [spare] = _spares(head_pid)
        before = actorrt.nodes()[1]
        actorrt.kill_node(1)
        after = wait_alive(1, before["epoch"])
        assert after["pid"] == spare  # started before the failure, it took the slot
        while not _spares(head_pid):  # and another is kept warm behind it
            assert time.monotonic() < deadline + 10, "no new warm node process"
            time.sleep(0.05)
        # The node that was a warm process fails too: one restart, one warm process behind it (it
        # was once taken for a spare that died unused, and replaced: one more per failure).
        for _ in range(3):
            before = actorrt.nodes()[1]
            actorrt.kill_node(1)
            wait_alive(1, before["epoch"])
        time.sleep(2.0)  # past the pause before a spare that died unused is replaced
        kept = _spares(head_pid)
    assert len(kept) == 1, kept
    assert spare not in kept
    deadline = time.monotonic() + 10
    while any(process_alive(pid) for pid in kept):
        assert time.monotonic() < deadline, "a warm node process outlived the cluster"
        time.sleep(0.05)
