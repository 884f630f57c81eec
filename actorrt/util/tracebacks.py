"""Tracebacks that show the caller's code, not a library's inside.

An error that crosses the public API (a remote method's ``TaskError``, a ``GetTimeoutError``) was
raised deep in the runtime: on the driver's loop thread, through ``concurrent.futures``. Those
frames say nothing to the user, whose traceback should read: their own call, then the remote
frames in the error's message. Three places print tracebacks, and each is told here:
- the exception leaves the public function with no traceback of its own (``at_call_site``);
- pytest hides a frame that sets ``__tracebackhide__``, so the public function's own frame does
  not show in a test report;
- a script's uncaught error goes through ``sys.excepthook``, and a notebook's through IPython's
  handler of custom exceptions: ``hide_frames_under`` sets both for the errors of one package, so
  the last frame (the re-raise, which IPython never hides) is left out there too.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def at_call_site(errors: type[BaseException] | tuple[type[BaseException], ...], fn: F) -> F:
    """``fn``, raising ``errors`` as if from where it was called: without the frames below it."""

    @functools.wraps(fn)
    def public(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # noqa: F841 - read by IPython and pytest
        try:
            return fn(*args, **kwargs)
        except errors as exc:
            raise exc.with_traceback(None)  # noqa: B904 - the same exception, with less of its path

    return public  # type: ignore[return-value]


def without_frames_under(tb: TracebackType | None, directory: str) -> TracebackType | None:
    """``tb`` without its entries for code in files under ``directory`` (relinks it in place)."""
    kept = []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(directory):
            kept.append(tb)
        tb = tb.tb_next
    for entry, after in zip(kept, [*kept[1:], None], strict=True):
        entry.tb_next = after
    return kept[0] if kept else None


class _HidingHook:
    """An excepthook that drops frames under ``directory`` from ``errors`` and hands over to the
    hook that was there before."""

    def __init__(self, errors: type[BaseException], directory: str, previous: Callable[..., Any]) -> None:
        self.errors, self.directory, self.previous = errors, directory, previous

    def __call__(self, kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        if isinstance(value, self.errors):
            tb = without_frames_under(tb, self.directory) or tb
        self.previous(kind, value, tb)


def hide_frames_under(errors: type[BaseException], directory: str) -> None:
    """Make ``sys.excepthook``, and IPython's shell if this is one, show uncaught ``errors``
    without frames under ``directory``."""
    if not isinstance(sys.excepthook, _HidingHook):
        sys.excepthook = _HidingHook(errors, directory, sys.excepthook)
    shell = _ipython_shell()
    if shell is not None and errors not in getattr(shell, "custom_exceptions", ()):

        def show(shell: Any, kind: type, value: BaseException, tb: TracebackType | None,
                 tb_offset: int | None = None) -> None:
            shell.showtraceback((kind, value, without_frames_under(tb, directory) or tb), tb_offset=tb_offset)

        shell.set_custom_exc((errors,), show)


def _ipython_shell() -> Any:
    ipython = sys.modules.get("IPython")  # only if the process runs it: never imported here
    return ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None

