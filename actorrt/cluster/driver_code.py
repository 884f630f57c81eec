"""How the driver's code reaches the node processes.

Classes and functions defined in a script or a notebook travel by value with each actor and call.
What they import travels by name: the node imports it. So a node must find the driver's modules:
- a cluster ``init()`` starts on this machine runs its processes in the driver's working directory,
  with the driver's ``sys.path`` (a helper module beside the script imports on the nodes too);
- to a cluster started apart (``actorrt start``), ``runtime_env={"py_modules": [...]}`` sends the
  named modules by value, inside the pickles of the code that uses them, so that code (and its
  replay after a failure, which reads the same pickles from the lineage) needs nothing installed.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType
from typing import Any

from actorrt.util import pickling

_KEYS = ("py_modules",)


def search_paths() -> list[str]:
    """The directories of this process's ``sys.path`` that a fresh interpreter of the same Python
    would not have (the script's folder, the working directory, ``PYTHONPATH``, additions), in order."""
    installed = tuple(os.path.join(os.path.realpath(p), "") for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})
    paths = []
    for entry in [*sys.path, os.getcwd()]:
        path = os.path.abspath(entry or os.getcwd())
        if (os.path.isdir(path) and path not in paths
                and not os.path.join(os.path.realpath(path), "").startswith(installed)):
            paths.append(path)
    return paths


def send_modules(runtime_env: dict[str, Any] | None) -> list[str]:
    """Check ``runtime_env`` and send its ``py_modules`` by value from now on; returns their names.

    Raises:
        TypeError, ValueError: a key or a module that is not one (the message says what is).
    """
    if runtime_env is None:
        return []
    if not isinstance(runtime_env, dict):
        raise TypeError(f"runtime_env must be a dict such as {{'py_modules': [module]}}, not "
                        f"{type(runtime_env).__name__}")
    unknown = sorted(set(runtime_env) - set(_KEYS))
    if unknown:
        hint = (" (working_dir: list the directory's modules in py_modules, or start the nodes in that directory)"
                if "working_dir" in unknown else "")
        raise ValueError(f"runtime_env has no {', '.join(unknown)}: its keys are {', '.join(_KEYS)}{hint}")
    modules = runtime_env.get("py_modules", [])
    if isinstance(modules, (str, ModuleType)) or not isinstance(modules, (list, tuple)):
        raise TypeError("runtime_env['py_modules'] must be a list of modules or module names")
    names = []
    for module in modules:
        module = _module(module)
        pickling.send_by_value(module)
        names.append(module.__name__)
    return names


def _module(module: Any) -> ModuleType:
    if isinstance(module, ModuleType):
        return module
    if not isinstance(module, str):
        raise TypeError(f"runtime_env['py_modules'] takes modules or their names, not a {type(module).__name__}")
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ValueError(f"runtime_env['py_modules']: this driver cannot import {module!r} itself: {exc}") from exc
