"""Named actors outlive their driver: a rerun finds its actor with ``get_if_exists``, the CLI lists
and kills them, and a killed actor's name can be taken again. Real head, nodes and driver processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import actorrt
from actorrt.core import context
from actorrt.exceptions import ActorRTError
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


    address, cls, hold = sys.argv[1], {"Totals": Totals, "Other": Other}[sys.argv[2]], sys.argv[3:] == ["hold"]
    actorrt.init(address=address, timeout=20)
    try:
        totals = cls.options(name="totals", get_if_exists=True).remote()
        print("TOTAL", actorrt.get(totals.add.remote(5), timeout=20), totals.actor_id.hex(), flush=True)
        if hold:  # until the test has killed the actor by its name
            sys.stdin.readline()
            try:
                actorrt.get(totals.add.remote(1), timeout=20)
            except actorrt.ActorDiedError as exc:
                print("DIED", exc, flush=True)
    except TypeError as exc:
        print("TYPE_ERROR", exc, flush=True)
    actorrt.shutdown()
""")


def _drive(c: Cluster, tmp_path: Path, address: str, cls: str = "Totals") -> str:
    ran = _start(c, tmp_path, address, cls, stdin=subprocess.DEVNULL)
    out, err = ran.communicate(timeout=60)
    assert ran.returncode == 0, out + err
    return out


def _start(c: Cluster, tmp_path: Path, address: str, cls: str = "Totals", *extra: str, stdin: int = subprocess.PIPE
           ) -> subprocess.Popen:
    script = tmp_path / "rerun.py"
    script.write_text(DRIVER)
    return subprocess.Popen([sys.executable, str(script), address, cls, *extra], env=c.env, stdin=stdin,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _actors(c: Cluster) -> dict[str, list[str]]:
    """The rows of ``actorrt list actors``, by name."""
    listed = c.cli("list", "actors")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["NAME", "CLASS", "NODE", "ACTOR_ID", "STATE"] and lines[-1].startswith("named actors:")
    return {row.split()[0]: row.split(maxsplit=4)[1:] for row in lines[1:-1]}


@pytest.mark.timeout(240)
def test_a_rerun_gets_its_named_actor_and_the_cli_lists_and_kills_it(cli_cluster: Cluster,  # noqa: F811
                                                                       tmp_path: Path) -> None:
    c = cli_cluster
    for command in (("list", "actors"), ("kill", "totals")):
        none = c.cli(*command)
        assert none.returncode == 1 and "no cluster is running on this machine" in none.stderr, none.stderr
    out = c.cli("start", "--head", "--nodes", "2")
    assert out.returncode == 0, out.stdout + out.stderr
    address = c.session()["head_address"]
    c.pids.add(c.session()["head_pid"])
    assert _actors(c) == {}

    first = _drive(c, tmp_path, address).split()
    assert first[:2] == ["TOTAL", "5"]
    again = _drive(c, tmp_path, address).split()
    assert again == ["TOTAL", "10", first[2]]  # the same actor, its state kept: no second constructor
    assert ("TYPE_ERROR the actor named 'totals' is a Totals, not a Other: choose another name"
            in _drive(c, tmp_path, address, "Other"))

    # Two drivers at once: one creates the actor, the other gets it (the head's registry decides).
    both = [_start(c, tmp_path, address, stdin=subprocess.DEVNULL) for _ in range(2)]
    outs = [p.communicate(timeout=60)[0].split() for p in both]
    assert sorted(o[1] for o in outs) == ["15", "20"] and {o[2] for o in outs} == {first[2]}, outs

    row = _actors(c)["totals"]
    assert row[0] == "Totals" and row[2] == first[2][:12] and row[3] == "alive", row
    slot = row[1]

    holder = _start(c, tmp_path, address, "Totals", "hold")  # a driver that keeps the handle
    assert holder.stdout.readline().split()[:2] == ["TOTAL", "25"]
    killed = c.cli("kill", "totals")
    assert killed.returncode == 0, killed.stdout + killed.stderr
    assert killed.stdout.strip() == f"killed Totals 'totals' ({first[2][:12]}) on node {slot}; the name is free"
    out, err = holder.communicate("\n", timeout=60)
    assert out.startswith("DIED") and "was killed with actorrt.kill" in out, out + err  # it stopped
    assert "totals" not in _actors(c)
    fresh = _drive(c, tmp_path, address).split()
    assert fresh[:2] == ["TOTAL", "5"] and fresh[2] != first[2]  # the name taken again, by a new actor

    unknown = c.cli("kill", "nobody")
    assert unknown.returncode == 1 and "no actor is named 'nobody'" in unknown.stderr
    assert "named actors: totals;" in unknown.stderr and "Traceback" not in unknown.stderr


@actorrt.remote
class Held:
    def __init__(self):
        self.n = 0

    def add(self, k):
        self.n += k
        return self.n


@actorrt.remote
class Creator:
    def make(self, name):
        return Held.options(name=name, node=1).remote()  # named from inside an actor

    def ping(self):
        return "pong"


def _named(name: str) -> actorrt.ActorHandle:
    deadline = time.monotonic() + 10
    while True:  # an actor takes its name in the background
        try:
            return actorrt.get_actor(name)
        except ValueError:
            assert time.monotonic() < deadline
            time.sleep(0.1)


@pytest.mark.timeout(180)
def test_a_killed_actors_name_stays_free_through_its_creators_replay(cluster_with) -> None:
    with cluster_with(num_nodes=2, store_shards=1):
        creator = Creator.options(node=0).remote()
        held = actorrt.get(creator.make.remote("held"), timeout=30)
        assert _named("held") == held
        actorrt.kill(held)
        with pytest.raises(ValueError, match="no actor is named 'held'"):
            actorrt.get_actor("held")
        actorrt.kill_node(0)  # the creator's replay creates `held` again, and asks for its name again
        assert actorrt.get(creator.ping.remote(), timeout=60) == "pong"
        time.sleep(1.0)  # what the replay asked of the head in the background has arrived
        with pytest.raises(ValueError, match="no actor is named 'held'"):
            actorrt.get_actor("held")
        fresh = Held.options(name="held", get_if_exists=True).remote()
        assert fresh != held and actorrt.get(fresh.add.remote(2), timeout=30) == 2


@pytest.mark.timeout(120)
def test_get_if_exists_that_loses_the_race_for_the_name_gets_the_winner(cluster_with, monkeypatch) -> None:
    with cluster_with(num_nodes=1, store_shards=1):
        first = Held.options(name="raced").remote()
        assert actorrt.get(first.add.remote(3), timeout=30) == 3
        # As if another driver took the name between this one's look-up and its creation.
        monkeypatch.setattr(context.current(), "find_actor", lambda name: None)
        again = Held.options(name="raced", get_if_exists=True).remote()
        assert again == first and actorrt.get(again.add.remote(1), timeout=30) == 4  # no second constructor
        with pytest.raises(TypeError, match="the actor named 'raced' is a Held, not a Creator"):
            Creator.options(name="raced", get_if_exists=True).remote()
        with pytest.raises(ActorRTError, match=r"get_if_exists=True\) is for drivers"):
            actorrt.get(Maker.remote().make.remote(), timeout=30)


@actorrt.remote
class Maker:
    def make(self):
        return Held.options(name="inner", get_if_exists=True).remote()


def test_get_if_exists_needs_a_name_and_a_bool():
    @actorrt.remote
    class Named:
        pass

    with pytest.raises(ValueError, match="get_if_exists=True needs a name="):
        Named.options(get_if_exists=True)
    with pytest.raises(ValueError, match="get_if_exists=True needs a name="):
        Named.options(name=None, get_if_exists=True)
    with pytest.raises(TypeError, match="get_if_exists must be a bool, not 'yes'"):
        Named.options(name="x", get_if_exists="yes")
    with pytest.raises(TypeError, match="get_if_exists must be a bool, not 1"):
        Named.options(name="x", get_if_exists=1)
    assert Named.options(name="x", get_if_exists=False)  # and False without a name is the default
