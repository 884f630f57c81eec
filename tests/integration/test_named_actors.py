"""Named actors outlive their driver: a rerun finds its actor with ``get_if_exists``, the CLI lists
and kills them, and a killed actor's name can be taken again. Real head, nodes and driver processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import actorrt
from tests.integration.test_cli import Cluster
from tests.integration.test_cli import cluster as cli_cluster  # noqa: F401 - a fixture

DRIVER = textwrap.dedent("""
    import sys

    import actorrt


    @actorrt.remote
    class Totals:
        def __init__(self):
            self.n = 0

        def add(self, k):
            self.n += k
            return self.n


    @actorrt.remote
    class Other:
        def add(self, k):
            return k


    address, cls = sys.argv[1], {"Totals": Totals, "Other": Other}[sys.argv[2]]
    actorrt.init(address=address, timeout=20)
    try:
        totals = cls.options(name="totals", get_if_exists=True).remote()
        print("TOTAL", actorrt.get(totals.add.remote(5), timeout=20), flush=True)
    except TypeError as exc:
        print("TYPE_ERROR", exc, flush=True)
    actorrt.shutdown()
""")


def _drive(c: Cluster, tmp_path: Path, address: str, cls: str = "Totals") -> str:
    script = tmp_path / "rerun.py"
    script.write_text(DRIVER)
    ran = subprocess.run([sys.executable, str(script), address, cls], env=c.env, capture_output=True, text=True,
                         timeout=60)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return ran.stdout


@pytest.mark.timeout(180)
def test_a_rerun_gets_its_named_actor_and_the_cli_lists_and_kills_it(cli_cluster: Cluster,  # noqa: F811
                                                                       tmp_path: Path) -> None:
    c = cli_cluster
    out = c.cli("start", "--head", "--nodes", "1")
    assert out.returncode == 0, out.stdout + out.stderr
    address = c.session()["head_address"]
    c.pids.add(c.session()["head_pid"])

    assert "TOTAL 5" in _drive(c, tmp_path, address)
    assert "TOTAL 10" in _drive(c, tmp_path, address)  # the same actor, its state kept: no second constructor
    assert "TYPE_ERROR the actor named 'totals' is a Totals, not a Other" in _drive(c, tmp_path, address, "Other")

    listed = c.cli("list", "actors")
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith("totals"))
    assert row.split()[1:3] == ["Totals", "0"] and row.split()[-1] == "alive", listed.stdout

    killed = c.cli("kill", "totals")
    assert killed.returncode == 0 and "the name is free" in killed.stdout, killed.stdout + killed.stderr
    assert "totals" not in c.cli("list", "actors").stdout
    assert "TOTAL 5" in _drive(c, tmp_path, address)  # the name taken again, by a new actor

    unknown = c.cli("kill", "nobody")
    assert unknown.returncode == 1 and "no actor is named 'nobody'" in unknown.stderr
    assert "Traceback" not in unknown.stderr


def test_get_if_exists_needs_a_name_and_a_bool():
    @actorrt.remote
    class Named:
        pass

    with pytest.raises(ValueError, match="get_if_exists=True needs a name="):
        Named.options(get_if_exists=True)
    with pytest.raises(TypeError, match="get_if_exists must be a bool"):
        Named.options(name="x", get_if_exists="yes")
