"""Every example the README names runs as a user runs it (its own process and embedded cluster),
with small sizes, and its own check of its result passes: a subprocess that exits 0 and prints it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[2] / "examples"


def run_example(tmp_path: Path, name: str, *args: str, timeout: float = 240) -> str:
    ran = subprocess.run([sys.executable, str(EXAMPLES / name), *args], cwd=tmp_path, capture_output=True,
                         text=True, timeout=timeout)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return ran.stdout


def test_quickstart(tmp_path):
    out = run_example(tmp_path, "quickstart.py")
    assert "a.add(5)            -> 15" in out and "a still answers" in out and out.rstrip().endswith("done")


def test_allreduce_is_bit_identical_to_numpy_through_a_kill(tmp_path):
    out = run_example(tmp_path, "allreduce.py", "--iterations", "4", "--size", "20000", "--kill")
    assert "bit-identical to plain numpy: True" in out
    assert "node 1 recovered:" in out


@pytest.mark.parametrize("model,ft", [("mlp", "lineage_stash"), ("mlp", "checkpoint")])
def test_sgd_killed_mid_run_converges_to_the_single_process_weights(tmp_path, model, ft):
    out = run_example(tmp_path, "sgd.py", "--model", model, "--iterations", "30", "--checkpoint-every", "10",
                      "--kill", "--ft", ft)
    loss = [float(v) for v in out.split("loss ")[1].split(",")[0].split(" -> ")]
    assert loss[1] < 0.5 * loss[0]  # it learns
    assert "bit-identical to single-process numpy: True" in out
    assert "node 1 recovered: actors 2" in out


def test_exactly_once_sink(tmp_path):
    out = run_example(tmp_path, "exactly_once_sink.py")
    assert "each of the 900 records exactly once" in out and "recovery: [{" in out


@pytest.mark.spark
def test_bridge_wordcount_with_a_kill_equals_spark(tmp_path):
    out = run_example(tmp_path, "bridge_wordcount.py", "--lines", "3000")
    assert "killed node" in out and "equals Spark's own groupBy().count(): True" in out


def test_streaming_wordcount_adds_up_to_the_plain_count_through_a_kill(tmp_path):
    out = run_example(tmp_path, "streaming_wordcount.py", "--lines", "2000", "--kill")
    assert "window counts add up to a plain-Python count: True" in out
    assert "node 1 recovered:" in out
