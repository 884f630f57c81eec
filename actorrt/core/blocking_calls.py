"""Which actor methods may block in ``actorrt.get`` or ``actorrt.wait``: read from their code.

Ray's most common pattern is a plain method that calls ``ray.get(other.method.remote())``. A
node runs an actor's plain methods on its event loop, where a blocking wait would stop every
actor of the node. So a plain method (or a constructor, or a plain remote function) whose code
reaches ``actorrt.get`` or ``actorrt.wait`` runs in a thread of its own instead, one task of the
actor at a time as always, while the loop serves the rest. The others stay on the loop: a thread
hop costs each task tens of microseconds.

The code is read once per class and method (``dis``): a name that resolves, in the function's
globals, to the blocking functions (``actorrt.get``, ``from actorrt import get``, or a module that
re-exports them, such as a shim named ``ray``); and, a few calls deep, the module's functions and
the class's methods it calls. A call made some other way (a function passed in, ``getattr``) is
not seen: the get then raises, saying to await the ref in an ``async def`` method instead.
"""

from __future__ import annotations

import dis
import functools
import sys
import types
from collections.abc import Callable
from typing import Any

# How many calls deep the search follows functions and methods.
SEARCH_DEPTH = 3


def may_block(cls: type, method: str, blocking: frozenset[Callable[..., Any]] | None = None) -> bool:
    """Whether ``cls.method`` (a plain function) may call one of ``blocking`` (by default
    ``actorrt.get`` and ``actorrt.wait``)."""
    return _may_block(cls, method, _public_blocking() if blocking is None else blocking)


def _public_blocking() -> frozenset[Callable[..., Any]]:
    """``actorrt.get`` and ``actorrt.wait`` as the package exports them: looked up, not imported
    (the public API is built on this layer)."""
    api = sys.modules.get("actorrt")
    return frozenset(f for f in (getattr(api, "get", None), getattr(api, "wait", None)) if f is not None)


def function_may_block(fn: Any) -> bool:
    """Whether remote function ``fn`` may call ``actorrt.get`` or ``actorrt.wait``."""
    return isinstance(fn, types.FunctionType) and _function_may_block(fn, _public_blocking())


@functools.lru_cache(maxsize=4096)
def _function_may_block(fn: types.FunctionType, blocking: frozenset[Callable[..., Any]]) -> bool:
    return _reaches(fn, object, blocking, SEARCH_DEPTH, set())


@functools.lru_cache(maxsize=4096)
def _may_block(cls: type, method: str, blocking: frozenset[Callable[..., Any]]) -> bool:
    fn = getattr(cls, method, None)
    return isinstance(fn, types.FunctionType) and _reaches(fn, cls, blocking, SEARCH_DEPTH, set())


def _reaches(fn: types.FunctionType, cls: type, blocking: frozenset, depth: int, seen: set[int]) -> bool:
    if id(fn) in seen:
        return False
    seen.add(id(fn))
    return _code_reaches(fn.__code__, fn.__globals__, cls, blocking, depth, seen)


def _code_reaches(code: types.CodeType, globals_: dict[str, Any], cls: type, blocking: frozenset, depth: int,
                  seen: set[int]) -> bool:
    previous: Any = _NOTHING
    for instruction in dis.get_instructions(code):
        name = instruction.argval
        if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            found = globals_.get(name, _NOTHING)
            if _is_blocking(found, blocking) or (  # a helper of the same module
                    _follow(found, depth) and found.__globals__ is globals_
                    and _reaches(found, cls, blocking, depth - 1, seen)):
                return True
            previous = found if isinstance(found, types.ModuleType) else _NOTHING
            continue
        if instruction.opname in ("LOAD_ATTR", "LOAD_METHOD") and isinstance(name, str):
            found = getattr(previous, name, _NOTHING) if previous is not _NOTHING else _NOTHING
            shim = name in _BLOCKING_NAMES and _follow(found, depth)  # a module's get that calls actorrt's
            if _is_blocking(found, blocking) or (shim and _reaches(found, cls, blocking, depth - 1, seen)):
                return True
            method = getattr(cls, name, _NOTHING)  # self.helper(...): a method of the class
            if _follow(method, depth) and _reaches(method, cls, blocking, depth - 1, seen):
                return True
        previous = _NOTHING
    return any(isinstance(const, types.CodeType) and _code_reaches(const, globals_, cls, blocking, depth, seen)
               for const in code.co_consts)  # lambdas, comprehensions, inner functions


def _is_blocking(found: Any, blocking: frozenset) -> bool:
    return any(found is b for b in blocking)


def _follow(found: Any, depth: int) -> bool:
    return depth > 0 and isinstance(found, types.FunctionType)


_BLOCKING_NAMES = frozenset({"get", "wait"})
_NOTHING = object()
