"""cloudpickle that keeps where pickled code was written.

Classes and functions defined in a script, a notebook cell or a test are pickled by value, code
objects included. cloudpickle (3.1.3 on) renames the file of every such code object to
``"<dynamic-code>"``, so a traceback raised on a node would name no file and show no line.

Each code object pickled here carries its file name and the source lines it spans, and gets them
back when it is loaded: tracebacks name the caller's file and show its lines, whatever the pickler
does with ``co_filename``, on a host where the file does not exist, and for a notebook cell, whose
source lives only in the kernel's ``linecache``. The name rides inside the pickle, beside the code
it belongs to, rather than in a side table the receiver would have to match up: every consumer of
the pickle (an actor's node, a replay, an actor that received a function as an argument) gets it,
and a pickle stays deterministic (same code, same bytes).
"""

from __future__ import annotations

import io
import linecache
import os
import sys
import types
from collections import ChainMap
from typing import Any

import cloudpickle

_cloudpickle_code_reduce = cloudpickle.Pickler.dispatch_table.get(types.CodeType)
# Arrays smaller than this are cheaper to keep inside the pickle stream.
OUT_OF_BAND_MIN = 1024


def _code_reduce(code: types.CodeType) -> tuple:
    rebuild, args = _cloudpickle_code_reduce(code)
    return _code_with_source, (rebuild, args, code.co_filename, code.co_firstlineno, _source_lines(code))


def _source_lines(code: types.CodeType) -> tuple[str, ...]:
    last = max((line for _, _, line in code.co_lines() if line is not None), default=code.co_firstlineno)
    return tuple(linecache.getlines(code.co_filename)[code.co_firstlineno - 1:last])


def _code_with_source(rebuild: Any, args: tuple, filename: str, first_line: int,
                      lines: tuple[str, ...]) -> types.CodeType:
    """Load a pickled code object under its own file name, and make its lines known to tracebacks
    where that file cannot be read (another host, a notebook cell)."""
    code = rebuild(*args)
    if code.co_filename != filename:
        code = code.replace(co_filename=filename)
    if lines and not os.path.exists(filename):
        _remember_lines(filename, first_line, lines)
    return code


def _remember_lines(filename: str, first_line: int, lines: tuple[str, ...]) -> None:
    # An entry whose mtime is None is one linecache never checks against the disk (as IPython's cells).
    entry = linecache.cache.get(filename)
    known = list(entry[2]) if entry is not None and entry[1] is None else []
    end = first_line - 1 + len(lines)
    if len(known) < end:
        known.extend("\n" for _ in range(end - len(known)))
    known[first_line - 1:end] = lines
    linecache.cache[filename] = (sum(map(len, known)), None, known, filename)


class Pickler(cloudpickle.Pickler):
    """``cloudpickle.Pickler`` whose code objects keep their file name and source lines, and whose
    non-contiguous numpy arrays go out of band like contiguous ones (numpy pickles them in-band:
    a copy inside the stream, and a writable array on the other side)."""

    if _cloudpickle_code_reduce is not None:  # else cloudpickle pickles code its own way: nothing to restore
        dispatch_table = ChainMap({types.CodeType: _code_reduce}, cloudpickle.Pickler.dispatch_table)

    def reducer_override(self, obj: Any) -> Any:
        numpy = sys.modules.get("numpy")  # only if the process uses it: never imported here
        if (numpy is not None and type(obj) is numpy.ndarray and not obj.flags.c_contiguous
                and not obj.flags.f_contiguous and not obj.dtype.hasobject and obj.nbytes >= OUT_OF_BAND_MIN):
            return numpy.ascontiguousarray(obj).__reduce_ex__(5)
        return super().reducer_override(obj)


def dumps(obj: Any, protocol: int = 5, buffer_callback: Any = None) -> bytes:
    """``cloudpickle.dumps``, keeping the file names and lines of code pickled by value."""
    with io.BytesIO() as file:
        Pickler(file, protocol=protocol, buffer_callback=buffer_callback).dump(obj)
        return file.getvalue()


_by_value_changes = 0


def send_by_value(module: Any) -> None:
    """Pickle what ``module`` (and its submodules) defines by value from now on, as if defined in
    ``__main__``: for code the receiving processes cannot import."""
    global _by_value_changes
    if module.__name__ not in cloudpickle.list_registry_pickle_by_value():
        cloudpickle.register_pickle_by_value(module)
        _by_value_changes += 1


class CachedPickle:
    """The pickle of one object (a class, a function), made once, and again once the modules
    pickled by value changed: one made before names a module the nodes may not import (a class
    used before ``shutdown()`` and ``init(runtime_env=...)``, as a notebook does)."""

    def __init__(self, obj: Any) -> None:
        self._obj = obj
        self._blob = b""
        self._made_at = -1

    def get(self) -> bytes:
        if self._made_at != _by_value_changes:
            self._blob, self._made_at = dumps(self._obj), _by_value_changes
        return self._blob


loads = cloudpickle.loads
