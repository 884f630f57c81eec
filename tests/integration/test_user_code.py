"""A user's code on the nodes, as a new user meets it: scripts run as real subprocesses, their
classes defined in ``__main__``, helper modules beside them, a notebook, an attached cluster.

What is checked is what the user sees: the traceback printed for a task that raised (the script's
file and line, nothing of the runtime, nothing else on stderr), errors nobody retrieved, the class
attributes a method reads, the modules a node can import, the BLAS threads a node starts.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.integration.test_cli import Cluster
from tests.integration.test_cli import cluster as cli_cluster  # noqa: F401 - a fixture

RUNTIME_DIR = str(Path(__file__).parents[2] / "actorrt")


def run_script(path: Path, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(path), *args], cwd=cwd or path.parent, env=env,
                          capture_output=True, text=True, timeout=timeout)


def write(path: Path, source: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip())
    return path


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


PARSER_SCRIPT = """
    import actorrt


    @actorrt.remote
    class Parser:
        def parse(self, text):
            return int(text)


    actorrt.init()
    parser = Parser.remote()
    print("parsed", actorrt.get(parser.parse.remote("12")), flush=True)
    actorrt.get(parser.parse.remote("oops"))
"""


def test_a_script_that_ends_with_a_task_error_prints_its_own_frames_and_nothing_else(tmp_path):
    script = write(tmp_path / "parse_numbers.py", PARSER_SCRIPT)
    ran = run_script(script)
    assert ran.returncode == 1 and ran.stdout == "parsed 12\n", ran.stdout + ran.stderr
    call_line, raise_line = line_of(script, 'parse.remote("oops")'), line_of(script, "return int(text)")
    expected = [
        "Traceback (most recent call last):",
        f'  File "{script}", line {call_line}, in <module>',
        '    actorrt.get(parser.parse.remote("oops"))',
        # the error's headline names the task that raised, its node and pid
        re.compile(r"actorrt\.exceptions\.TaskError\(ValueError\): Parser\([0-9a-f]+\)\.parse on node \d "
                   r"\(pid \d+\) raised ValueError: invalid literal for int\(\) with base 10: 'oops'"),
        "",
        "Remote traceback:",
        "Traceback (most recent call last):",
        f'  File "{script}", line {raise_line}, in parse',
        "    return int(text)",
        re.compile(r"\s+\^+"),
        "ValueError: invalid literal for int() with base 10: 'oops'",
    ]
    lines = ran.stderr.splitlines()
    while lines and not lines[-1]:
        lines.pop()
    assert len(lines) == len(expected), ran.stderr  # the error, once: no asyncio noise, no log lines
    for line, want in zip(lines, expected, strict=True):
        assert want.fullmatch(line) if isinstance(want, re.Pattern) else line == want, (line, ran.stderr)


def test_a_helper_module_beside_the_script_is_imported_by_the_nodes_and_shows_in_tracebacks(tmp_path):
    app = tmp_path / "app"
    helper = write(app / "geometry.py", """
        def area(width, height):
            if width < 0:
                raise ValueError(f"negative width {width}")
            return width * height
    """)
    script = write(app / "shapes.py", """
        import actorrt
        import geometry


        @actorrt.remote
        class Shapes:
            def area(self, width):
                return geometry.area(width, 2)


        actorrt.init()
        shapes = Shapes.remote()
        print("area", actorrt.get(shapes.area.remote(3)), flush=True)
        try:
            actorrt.get(shapes.area.remote(-1))
        except ValueError as exc:
            print(exc.remote_traceback, flush=True)
        actorrt.shutdown()
    """)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ran = run_script(script, cwd=elsewhere)  # run from another directory: the script's folder is not the cwd
    assert ran.returncode == 0 and "area 6" in ran.stdout, ran.stdout + ran.stderr
    assert f'File "{script}", line {line_of(script, "return geometry.area")}, in area' in ran.stdout
    assert f'File "{helper}", line {line_of(helper, "raise ValueError")}, in area' in ran.stdout
    assert 'raise ValueError(f"negative width {width}")' in ran.stdout


def test_a_notebook_cell_class_shows_the_cells_lines_and_not_the_runtime(tmp_path):
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import actorrt\nactorrt.init(num_nodes=1, store_shards=1)"),
        nbformat.v4.new_code_cell("@actorrt.remote\nclass Cell:\n    def check(self, x):\n"
                                  "        assert x > 0, f'not positive: {x}'\n        return x"),
        nbformat.v4.new_code_cell("actorrt.get(Cell.remote().check.remote(-5))"),
        nbformat.v4.new_code_cell("actorrt.shutdown()"),
    ])
    client = NotebookClient(notebook, timeout=120, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    error = next(o for o in notebook.cells[2].outputs if o["output_type"] == "error")
    shown = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(error["traceback"]))  # without IPython's colours
    assert error["ename"] == "TaskError(AssertionError)"
    assert "assert x > 0, f'not positive: {x}'" in shown  # the cell's source line, from the node's traceback
    assert "in check" in shown and "AssertionError: not positive: -5" in shown
    assert RUNTIME_DIR not in shown and "<dynamic-code>" not in shown


def test_class_attributes_and_static_methods_through_the_decorated_name(tmp_path):
    script = write(tmp_path / "attributes.py", """
        import actorrt


        @actorrt.remote
        class Worker:
            GP = 3
            NAMES = ("a", "b")

            @staticmethod
            def scaled(x):
                return Worker.GP * x

            @classmethod
            def describe(cls):
                return f"{cls.__name__} of {len(cls.NAMES)}"

            def step(self, x):
                return Worker.scaled(x) + len(Worker.NAMES), Worker.describe()


        actorrt.init()
        print("driver", Worker.GP, Worker.scaled(2), Worker.describe())
        print("node", actorrt.get(Worker.remote().step.remote(5)))
        try:
            Worker.MISSING
        except AttributeError as exc:
            print("missing", exc)
        actorrt.shutdown()
    """)
    ran = run_script(script)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "driver 3 6 Worker of 2" in ran.stdout
    assert "node (17, 'Worker of 2')" in ran.stdout
    assert "missing actor class Worker has no attribute 'MISSING'" in ran.stdout


def test_nodes_start_one_blas_thread_unless_told_otherwise(tmp_path):
    script = write(tmp_path / "threads.py", """
        import os
        import actorrt


        @actorrt.remote
        class Probe:
            def threads(self):
                return {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


        actorrt.init(num_nodes=1, store_shards=1)
        print(actorrt.get(Probe.remote().threads.remote()))
        actorrt.shutdown()
    """)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    ran = run_script(script, env=env)
    assert ran.returncode == 0, ran.stderr
    assert "{'OMP_NUM_THREADS': '1', 'OPENBLAS_NUM_THREADS': '1', 'MKL_NUM_THREADS': '1'}" in ran.stdout
    ran = run_script(script, env=dict(env, OPENBLAS_NUM_THREADS="2"))  # the user's choice wins
    assert "'OPENBLAS_NUM_THREADS': '2'" in ran.stdout and "'OMP_NUM_THREADS': '1'" in ran.stdout, ran.stderr


def test_an_error_nobody_retrieves_is_reported_once_in_the_driver_and_in_the_nodes_log(tmp_path):
    script = write(tmp_path / "reducer.py", """
        import time
        from pathlib import Path

        import actorrt
        from actorrt.core import context


        @actorrt.remote
        class Reducer:
            def __init__(self):
                self.total = 0

            def add(self, x):
                if x == 3:
                    raise ValueError(f"bad record {x}")
                self.total += x
                return self.total


        actorrt.init(num_nodes=1, store_shards=1)
        reducer = Reducer.remote()
        for x in range(6):
            reducer.add.remote(x)  # fire and forget: nobody gets these refs
        handled = reducer.add.remote(3)
        try:
            actorrt.get(handled)
        except ValueError:
            print("handled", flush=True)
        del handled
        print("total", actorrt.get(reducer.add.remote(0)), flush=True)
        time.sleep(0.5)  # the dropped refs' reports are written on the driver's loop
        # The node's log, before shutdown removes the embedded cluster's session directory.
        logs = Path(context.current().head_process.session.session_dir) / "logs"
        print("node log:", (logs / "node-0.log").read_text().count("raised ValueError: bad record 3"), flush=True)
        actorrt.shutdown()
    """)
    ran = run_script(script)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "handled" in ran.stdout and "total 12" in ran.stdout
    assert "node log: 2" in ran.stdout  # each failure, handled or not, is in the node's log
    reports = ran.stderr.count("a task failed and its result was never retrieved")
    assert reports == 1, ran.stderr  # the fire-and-forget failure; not the one the script handled
    assert "Reducer(" in ran.stderr and "raised ValueError: bad record 3" in ran.stderr
    assert f'File "{script}", line {line_of(script, "raise ValueError")}, in add' in ran.stderr


def test_a_constructor_error_is_told_once_and_results_dropped_by_design_are_no_failures(tmp_path):
    """A failed constructor: the call raises its error, with its traceback, and nothing else tells
    it; a handle never called tells it once when it goes. Fire-and-forget calls through a node
    kill: exact, and no report of a failure that did not happen. No task is left pending at exit.
    Written as a Ray program: no init() (the first .remote() starts the cluster), Ray's resource
    options (ignored, one warning each) and those that hold here (accepted)."""
    script = write(tmp_path / "walls.py", """
        import asyncio
        import time

        import actorrt
        from actorrt.core import context


        @actorrt.remote
        class Bad:
            def __init__(self):
                raise ValueError("bad config")

            def f(self):
                return 1


        @actorrt.remote(num_cpus=1, max_restarts=-1)
        class Adder:
            def __init__(self):
                self.total = 0

            def add(self, k):
                self.total += k

            def get(self):
                return self.total


        @actorrt.remote
        class Mapper:
            def __init__(self, adders):
                self.adders = adders

            def map(self, ks):
                for k in ks:
                    self.adders[k % len(self.adders)].add.remote(k)  # fire and forget


        bad = Bad.remote()  # no init() before: this starts the cluster
        try:
            actorrt.get(bad.f.remote())
        except actorrt.ActorDiedError as exc:
            print("raised with its traceback:", 'raise ValueError("bad config")' in str(exc), flush=True)
        adders = [Adder.options(node=0, checkpoint_every=25, lifetime="detached", num_cpus=2).remote()
                  for _ in range(2)]
        mappers = [Mapper.options(node=1).remote(adders) for _ in range(2)]
        for b in range(400):
            mappers[b % 2].map.remote(range(10 * b, 10 * b + 10))  # fire and forget
            if b in (150, 300):
                actorrt.kill_node(1)
            time.sleep(0.002)
        deadline = time.time() + 60
        while (total := sum(actorrt.get([a.get.remote() for a in adders], timeout=60))) != sum(range(4000)) \\
                and time.time() < deadline:
            time.sleep(0.2)  # the mappers' adds are on their way
        print("exact:", total == sum(range(4000)), flush=True)
        never_called = Bad.remote()
        time.sleep(1)
        del never_called  # told now, once
        time.sleep(0.5)
        loop = context.current().loop
        actorrt.shutdown()
        print("pending at exit:", [t for t in asyncio.all_tasks(loop) if not t.done()], flush=True)
    """)
    ran = run_script(script)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "raised with its traceback: True" in ran.stdout and "exact: True" in ran.stdout, ran.stdout + ran.stderr
    assert ran.stderr.count("never retrieved") == 1, ran.stderr  # never_called's constructor, and nothing else
    assert "no longer keeps" not in ran.stderr
    assert "pending at exit: []" in ran.stdout and "Task was destroyed" not in ran.stderr
    assert ran.stderr.count("actorrt.init() was not called: starting an embedded cluster") == 1, ran.stderr
    assert ran.stderr.count("num_cpus=") == 1, ran.stderr  # one warning, whatever the number of uses


def test_an_attached_cluster_that_cannot_import_a_module_says_so_and_runtime_env_sends_it(
        cli_cluster: Cluster, tmp_path: Path):  # noqa: F811 - the fixture
    c = cli_cluster
    elsewhere = tmp_path / "cluster-runs-here"
    elsewhere.mkdir()
    out = subprocess.run([sys.executable, "-m", "actorrt", "start", "--head", "--nodes", "1"], env=c.env,
                         cwd=elsewhere, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    address = c.session()["head_address"]
    c.pids.add(c.session()["head_pid"])
    write(tmp_path / "app" / "pricing.py", """
        def with_tax(amount):
            return round(amount * 1.2, 2)
    """)
    script = write(tmp_path / "app" / "shop.py", """
        import sys

        import actorrt
        import pricing


        @actorrt.remote
        class Till:
            def charge(self, amount):
                return pricing.with_tax(amount)


        address = sys.argv[1]
        for runtime_env in (None, {"py_modules": [pricing]}):  # a notebook: init, shutdown, init again
            actorrt.init(address=address, runtime_env=runtime_env)
            try:
                print("charged", actorrt.get(Till.remote().charge.remote(10)), flush=True)
            except actorrt.ActorDiedError as exc:
                print("died", exc, flush=True)
            actorrt.shutdown()
    """)
    ran = run_script(script, address, env=c.env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    missing, sent = ran.stdout.rsplit("\n", 2)[0], ran.stdout.rstrip().rsplit("\n", 1)[-1]
    assert re.search(r"died actor Till\(\w+\) died: its class could not be loaded on node 0: class Till needs "
                     r"module 'pricing', which node process \d+ cannot import", missing), ran.stdout
    assert "runtime_env={'py_modules': ['pricing']}" in missing
    assert sent == "charged 12.0", ran.stdout + ran.stderr  # the class used before is sent with its module now


def test_runtime_env_says_what_it_takes(cluster_with):
    import actorrt

    with pytest.raises(ValueError, match="runtime_env has no working_dir: its keys are py_modules"):
        actorrt.init(runtime_env={"working_dir": "."})
    with pytest.raises(TypeError, match="list of modules or module names"):
        actorrt.init(runtime_env={"py_modules": "pricing"})
    with pytest.raises(ValueError, match="this driver cannot import 'no_such_module_here'"):
        actorrt.init(runtime_env={"py_modules": ["no_such_module_here"]})
    assert not actorrt.is_initialized()
