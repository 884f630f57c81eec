"""The generated modules in actorrt/rpc must be what scripts/gen_protos.sh makes from protos/."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_code_is_fresh(tmp_path):
    copy = tmp_path / "repo"
    (copy / "actorrt").mkdir(parents=True)
    shutil.copytree(ROOT / "protos", copy / "protos")
    shutil.copytree(ROOT / "scripts", copy / "scripts")
    shutil.copytree(ROOT / "actorrt" / "rpc", copy / "actorrt" / "rpc")
    # The script runs `python`: this interpreter, whose environment has grpc_tools.
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    subprocess.run(["bash", str(copy / "scripts" / "gen_protos.sh")], check=True, capture_output=True, env=env)
    for fresh in sorted((copy / "actorrt" / "rpc").glob("*_pb2*")):
        committed = ROOT / "actorrt" / "rpc" / fresh.name
        assert committed.exists(), f"{fresh.name} is not committed"
        assert committed.read_text() == fresh.read_text(), f"{fresh.name} is stale: run scripts/gen_protos.sh"
