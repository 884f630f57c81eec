"""Code pickled by value keeps its file name and source lines, whatever cloudpickle does with them."""

from __future__ import annotations

import linecache
import subprocess
import sys

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
