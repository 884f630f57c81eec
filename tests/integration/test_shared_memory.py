"""Large objects cross processes of one host through shared memory: what arrives, that it is
read-only and not a copy, that segments are freed and reused, and that no kill leaks one.

Segments are memfds named ``actorrt-object``: ``/proc/<pid>/fd`` and ``/proc/<pid>/maps`` show
which processes hold each one, so the tests count them from outside the runtime."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
from pathlib import Path

import cloudpickle
import numpy as np
import pytest

import actorrt
from actorrt.core import context
from tests.support.waiting import eventually

cloudpickle.register_pickle_by_value(sys.modules[__name__])

MB = 1 << 20


def segments() -> set[int]:
    """The inodes of every actorrt segment this cluster's processes (this driver, its nodes) hold
    open or map: a process that died holds none."""
    found = set()
    for pid in {os.getpid(), *(n["pid"] for n in actorrt.nodes() if n["pid"])}:
        proc = Path("/proc") / str(pid)
        try:
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("/memfd:actorrt-object"):
                    found.add(os.stat(fd).st_ino)
            for line in (proc / "maps").read_text().splitlines():
                if "/memfd:actorrt-object" in line:
                    found.add(int(line.split()[4]))
        except (FileNotFoundError, PermissionError, ProcessLookupError):
            continue
    return found


@actorrt.remote
class Holder:
    def __init__(self):
        self.kept = []
        self.absorbed = 0.0
        self.calls = 0

    def absorb(self, value):
        self.absorbed += float(value.sum())
        self.calls += 1
        return self.calls

    def absorbed_total(self):
        return self.absorbed

    def describe(self, value):
        return describe(value)

    def keep(self, value):
        self.kept.append(value)
        return len(self.kept)

    def drop(self):
        self.kept.clear()
        return 0

    def total(self):
        return float(sum(float(np.asarray(v).sum()) for v in self.kept))

    def make(self, n, fill):
        return np.full(n, fill, dtype=np.float64)

    def pid(self):
        return os.getpid()


def describe(value):
    """What a value is, with arrays as (dtype, shape, read-only, checksum)."""
    if isinstance(value, np.ndarray):
        return ("array", str(value.dtype), value.shape, not value.flags.writeable or value.nbytes < 1024,
                float(np.asarray(value, dtype=np.float64).sum()) if value.dtype.kind in "biuf" else value.tobytes())
    if isinstance(value, dict):
        return {k: describe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value).__name__, [describe(v) for v in value]
    return value


def test_arrays_of_every_kind_arrive_whole_read_only_and_equal(cluster_with):
    with cluster_with(num_nodes=2, store_shards=1):
        _round_trips()


def _round_trips():
    holder = Holder.options(node=1).remote()
    rng = np.random.default_rng(7)
    values = [rng.integers(-100, 100, size=(300, 200), dtype=dtype) for dtype in (np.int8, np.int32, np.int64)]
    values += [rng.random((400, 300)).astype(dtype) for dtype in (np.float16, np.float32, np.float64)]
    values += [rng.random((500, 400))[::2, ::3],  # not contiguous: pickled in-band, still equal
               np.asfortranarray(rng.random((300, 300))),
               np.arange(200_000, dtype=np.uint16), (rng.random(50_000) > 0.5),
               {"weights": rng.random((256, 256)), "bias": [rng.random(40_000), rng.random(3)]}]
    for value in values:
        sent = describe(value)
        got = actorrt.get(holder.describe.remote(value), timeout=60)
        expected = _as_read_only(sent)
        assert got == expected, (sent, got)
    big = rng.random(2 * MB // 8)
    back = actorrt.get(holder.make.remote(len(big), 3.5), timeout=60)
    assert back.dtype == np.float64 and back.shape == big.shape and not back.flags.writeable
    assert float(back.sum()) == 3.5 * len(big)
    writable = back.copy()  # how to get a writable copy
    writable[0] = 1.0
    assert writable.flags.writeable and back[0] == 3.5


def _as_read_only(described):
    """``describe``'s view of a value as the receiver sees it: arrays arrive read-only (but the
    smallest, pickled in the stream, which ``describe`` counts as such)."""
    if isinstance(described, tuple) and described and described[0] == "array":
        return ("array", described[1], described[2], True, described[4])
    if isinstance(described, dict):
        return {k: _as_read_only(v) for k, v in described.items()}
    if isinstance(described, tuple) and len(described) == 2 and isinstance(described[1], list):
        return described[0], [_as_read_only(v) for v in described[1]]
    return described


@pytest.mark.parametrize("ft", ["none", "lineage_stash"])
def test_a_large_argument_is_not_a_copy_and_its_segment_is_reused(cluster_with, ft):
    with cluster_with(num_nodes=1, store_shards=1, ft=ft):
        holder = Holder.options(node=0).remote()
        array = np.ones(8 * MB // 8)
        before = _driver_shared()
        for _ in range(10):
            assert actorrt.get(holder.describe.remote(array), timeout=60)[4] == len(array)
        if ft == "lineage_stash":  # kept for the actor's replay until its checkpoint covers the calls
            assert _driver_shared()["in_use_bytes"] >= 10 * array.nbytes
            actorrt.checkpoint([holder], timeout=60)
            for _ in range(10):
                assert actorrt.get(holder.describe.remote(array), timeout=60)[4] == len(array)
            actorrt.checkpoint([holder], timeout=60)
        after = _driver_shared()
        calls = 10 if ft == "none" else 20
        # a copy each, into shared memory
        assert after["written_bytes"] - before["written_bytes"] >= calls * array.nbytes
        assert after["reused"] - before["reused"] >= calls - 11  # segments nobody held any more came back
        assert after["in_use_bytes"] <= 2 * 16 * MB


def test_shared_memory_stays_bounded_over_a_long_loop_of_large_arguments(cluster_with):
    with cluster_with(num_nodes=2, store_shards=1, ft="none"):
        holder = Holder.options(node=1).remote()
        start = len(segments())
        for i in range(40):
            array = np.full(25 * MB // 8, float(i))
            assert actorrt.get(holder.describe.remote(array), timeout=60)[4] == i * len(array)
        assert len(segments()) - start <= 4, "segments pile up"
        assert _driver_shared()["in_use_bytes"] <= 2 * 32 * MB


def test_what_an_actor_keeps_stays_valid_until_it_lets_go(cluster_with):
    with cluster_with(num_nodes=2, store_shards=1, ft="none"):
        holder = Holder.options(node=1).remote()
        for i in range(5):
            actorrt.get(holder.keep.remote(np.full(MB // 8 * 2, float(i))), timeout=60)  # kept past the call
        assert _driver_shared()["lent"] == 5
        for _ in range(10):  # same size, not kept: their segments are reused, never the kept ones
            actorrt.get(holder.describe.remote(np.full(MB // 8 * 2, -1.0)), timeout=60)
        assert _driver_shared()["reused"] >= 8
        assert actorrt.get(holder.total.remote(), timeout=60) == sum(i * (MB // 8 * 2) for i in range(5))
        actorrt.get(holder.drop.remote(), timeout=60)
        eventually(lambda: _driver_shared()["lent"] == 0, timeout=10, what="the actor to give its leases back")


def test_a_killed_process_leaks_no_segment(cluster_with):
    with cluster_with(num_nodes=2, store_shards=1, ft="none"):
        baseline = segments()
        holder = Holder.options(node=1).remote()
        made = [holder.make.remote(2 * MB // 8, float(i)) for i in range(3)]  # results it created
        actorrt.get([holder.keep.remote(np.full(MB, 1.0)) for _ in range(3)], timeout=60)  # arguments it maps
        got = actorrt.get(made, timeout=60)
        assert len(segments() - baseline) >= 6
        os.kill(actorrt.get(holder.pid.remote(), timeout=60), signal.SIGKILL)
        eventually(lambda: next(n for n in actorrt.nodes() if n["node"] == 1)["epoch"] > 1, timeout=30,
                   what="node 1 to be restarted")
        # The driver's own arguments come back to its pool once the dead holder is known dead, and
        # the results it holds (made by the dead process) survive it: it still reads them.
        assert [float(a[0]) for a in got] == [0.0, 1.0, 2.0]
        del got, made
        eventually(lambda: len(segments() - baseline) <= 3, timeout=30,
                   what="the dead process's segments to be freed")


def _status_rows() -> list[dict[str, str]]:
    session = context.current().head_process.session
    out = subprocess.run([sys.executable, "-m", "actorrt", "status", "--address", session.head_address, "--token",
                          session.token], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    header = next(line for line in lines if line.startswith("SLOT")).split()
    rows = [dict(zip(header, line.split(), strict=False)) for line in lines if line[:1].isdigit()]
    return [dict.fromkeys(header, ""), *rows]


def _driver_shared():
    return actorrt.stats()["driver"]["shared_memory"]


@pytest.mark.parametrize("ft", ["lineage_stash"])
def test_a_replay_gets_its_large_inputs_again(cluster_with, ft):
    with cluster_with(num_nodes=2, store_shards=1, ft=ft):
        holder = Holder.options(node=1).remote()
        arrays = [np.full(MB // 4, float(i)) for i in range(6)]
        for a in arrays:
            actorrt.get(holder.keep.remote(a), timeout=60)
        actorrt.kill_node(1)
        # The replay runs the six keeps again: their arguments come from the driver, which kept them.
        assert actorrt.get(holder.total.remote(), timeout=120) == float(sum(a.sum() for a in arrays))


@pytest.mark.parametrize("passed", ["argument", "ref"])
def test_memory_kept_for_replays_stays_bounded_without_checkpoints(cluster_with, passed):
    """A driver passing large arrays to an actor that never checkpoints: what it keeps for the
    actor's replay passes a quarter of the budget, so it asks the actor to checkpoint. The kept
    arrays' segments come back to its pool then, and spares are made beside them: no call but the
    first faults in a segment of its own, and none is written while its array is kept."""
    with cluster_with(num_nodes=1, store_shards=1, pinned_budget_bytes=64 * MB):
        holder = Holder.options(node=0).remote()
        peak = 0
        before = _driver_shared()
        for i in range(30):
            array = np.full(4 * MB // 8, float(i))
            ref = actorrt.put(array) if passed == "ref" else array
            assert actorrt.get(holder.absorb.remote(ref), timeout=60) == i + 1
            del ref, array
            peak = max(peak, actorrt.stats()["driver"]["objects_kept"]["pinned_bytes"])
        shared = _driver_shared()
        assert shared["created"] - before["created"] <= 2, shared  # a spare was there, or under way
        assert shared["reused"] - before["reused"] >= 28, shared
        kept = actorrt.stats()["driver"]["objects_kept"]
        assert kept["pressure_checkpoints"] >= 1
        shown = _status_rows()  # `actorrt status` shows each node's shared memory, kept, spilled and freed
        assert {"SHM_MB", "PINNED_MB", "SPILLED_MB", "FREED_MB"} <= set(shown[0]) and shown[1]["SHM_MB"].isdigit()
        # 120 MB passed; kept at most twice a quarter of the budget (what comes while a checkpoint is taken)
        assert peak <= 2 * 16 * MB + 2 * 4 * MB + MB, peak
        assert kept["spilled_bytes"] == 0  # released by checkpoints, not spilled
        # The actor's state is whole, and so is its replay from the pressure checkpoints.
        expected = float(sum(i * (4 * MB // 8) for i in range(30)))
        assert actorrt.get(holder.absorbed_total.remote(), timeout=60) == expected
        actorrt.kill_node(0)
        assert actorrt.get(holder.absorbed_total.remote(), timeout=120) == expected


@actorrt.remote
class Maker:
    def make(self, n, fill):
        return np.full(n, fill, dtype=np.float64)

    def make_elsewhere(self, other, n, fill):
        """A ref another actor's node owns: the driver borrows it."""
        return [other.make.remote(n, fill)]


def test_a_waited_for_value_is_let_go_with_its_ref(cluster_with):
    """``wait`` keeps what it found ready for a later ``get`` of the ref: an actor's result mapped
    here. Once the ref is gone, so is that, and with it the driver's hold on the segment (it held
    every segment it had waited for, and the actor's node kept them all in use)."""
    with cluster_with(num_nodes=2, store_shards=1, ft="none"):
        maker, other = Maker.options(node=0).remote(), Maker.options(node=1).remote()
        n = 2 * MB // 8
        for i in range(5):
            ref = maker.make.remote(n, float(i))  # owned by the driver
            assert actorrt.wait([ref], timeout=60)[0] == [ref]
            del ref
            gc.collect()
        eventually(lambda: _driver_shared()["held_from_others"] == 0, timeout=10,
                   what="the driver to let go of the segments it waited for")
        eventually(lambda: actorrt.stats()["nodes"][0]["shared_memory"]["in_use"] <= 1, timeout=10,
                   what="the maker's node to have its segments back")
        [borrowed] = actorrt.get(maker.make_elsewhere.remote(other, n, 7.0), timeout=60)
        assert actorrt.wait([borrowed], timeout=60)[0] == [borrowed]
        assert _driver_shared()["held_from_others"] == 1
        del borrowed
        gc.collect()
        eventually(lambda: _driver_shared()["held_from_others"] == 0, timeout=10,
                   what="the driver to let go of a borrowed value it waited for")


@pytest.mark.parametrize("ft", ["none", "lineage_stash"])
def test_an_actors_result_passed_on_to_another_actor_comes_back_to_its_pool(cluster_with, ft):
    """``b.absorb.remote(a.make.remote(...))``: the driver owns the result and passes it on to the
    other actor's node beside its task. Once both let go, the maker's node writes its next result
    into the same segment (a segment passed on used to be closed, and every call faulted in a
    fresh one)."""
    with cluster_with(num_nodes=2, store_shards=1, ft=ft):
        maker, sink = Maker.options(node=0).remote(), Holder.options(node=1).remote()
        n = 4 * MB // 8
        for i in range(12):
            assert actorrt.get(sink.absorb.remote(maker.make.remote(n, 1.0)), timeout=60) == i + 1
            if ft == "lineage_stash" and i % 3 == 2:  # the driver keeps the arguments for the sink's replay until then
                actorrt.checkpoint([sink], timeout=60)
        made = actorrt.stats()["nodes"][0]["shared_memory"]
        assert made["created"] <= 4 and made["reused"] >= 8, made
        assert actorrt.get(sink.absorbed_total.remote(), timeout=60) == 12.0 * n
