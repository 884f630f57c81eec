"""Code pickled by value keeps its file name and source lines, whatever cloudpickle does with them."""

from __future__ import annotations

import linecache
import subprocess
import sys
import types

import cloudpickle

from actorrt.util import pickling

CELL = "/no/such/dir/ipykernel_0/cell_7.py"  # a notebook cell's file: in linecache only, not on disk
SOURCE = "def check(x):\n    helper = lambda v: 1 / v\n    return helper(x)\n"

LOAD_AND_CALL = """
import sys, traceback
from actorrt.util import pickling
fn = pickling.loads(sys.stdin.buffer.read())
try:
    fn(0)
except ZeroDivisionError:
    traceback.print_exc(file=sys.stdout)
"""


def _cell_function():
    linecache.cache[CELL] = (len(SOURCE), None, SOURCE.splitlines(True), CELL)  # as IPython registers a cell
    namespace = {"__name__": "a_cell_module_nobody_can_import"}
    exec(compile(SOURCE, CELL, "exec"), namespace)
    return namespace["check"]


def test_a_function_from_a_cell_shows_its_file_and_lines_in_another_process():
    blob = pickling.dumps(_cell_function())
    shown = subprocess.run([sys.executable, "-c", LOAD_AND_CALL], input=blob, capture_output=True,
                           timeout=60).stdout.decode()
    assert f'File "{CELL}", line 3, in check\n    return helper(x)' in shown, shown
    assert f'File "{CELL}", line 2, in <lambda>\n    helper = lambda v: 1 / v' in shown, shown  # nested code too


def test_the_pickle_is_deterministic_and_loads_with_plain_cloudpickle():
    fn = _cell_function()
    assert pickling.dumps(fn) == pickling.dumps(fn)
    loaded = cloudpickle.loads(pickling.dumps(fn))
    assert loaded.__code__.co_filename == CELL and loaded(4) == 0.25


def test_a_remote_class_in_a_module_the_nodes_cannot_import_pickles_whole():
    """Its methods and static methods travel by value although the decorated name exposes them."""
    import actorrt

    module = types.ModuleType("a_module_only_the_driver_has")
    exec("import actorrt\n@actorrt.remote\nclass Worker:\n    K = 2\n    @staticmethod\n    def twice(x):\n"
         "        return Worker.K * x\n    def step(self, x):\n        return Worker.twice(x)\n", module.__dict__)
    sys.modules[module.__name__] = module
    try:
        assert isinstance(module.Worker, actorrt.ActorClass) and module.Worker.twice(3) == 6
        blob = pickling.dumps(module.Worker._cls)
    finally:
        del sys.modules[module.__name__]
    assert pickling.loads(blob)().step(5) == 10  # nothing imported by name
