"""The exactly-once file sink example, run as users run it: a node is SIGKILLed mid-stream."""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path

from actorrt.sinks import read_parts

EXAMPLE = Path(__file__).parents[2] / "examples" / "exactly_once_sink.py"


def test_the_file_sink_writes_every_record_exactly_once_across_a_node_kill(tmp_path):
    run = subprocess.run([sys.executable, str(EXAMPLE), str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "killing node 1" in run.stdout and "'actors': 1" in run.stdout, run.stdout
    # Checked again here, independently of the example's own check.
    parts = [json.loads(p) for p in read_parts(tmp_path)]
    records = collections.Counter(r for part in parts for r in part["records"])
    assert records == collections.Counter(f"record-{i}" for i in range(900))
    assert len(parts) == 90 and all(len(p["records"]) == 10 for p in parts)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "a temporary file was left behind"
