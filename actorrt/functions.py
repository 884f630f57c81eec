"""Remote functions: what ``@actorrt.remote`` makes of a function.

A call is a task like an actor method's, with lineage like any task, but its receiver keeps no
state: any node can run it, and running it again gives the same result. So a call whose node
fails is simply run again (on the slot's restarted node, or on another live node), and a caller
that replays re-sends it under the same task ID. What the function does must follow from its
arguments alone: it may call other remote functions and actors, and create actors (their calls
get IDs derived from its own, so a re-run makes the same ones, which an actor answers from what
it kept instead of applying them twice), but it records nothing with ``actorrt.record``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from actorrt.core import context
from actorrt.core.object_ref import ObjectRef
from actorrt.handles import check_arguments, check_node, check_option_names
from actorrt.lineage.options import MAX_SPEC_BYTES
from actorrt.util import pickling

R = TypeVar("R")



@dataclass(frozen=True)
class FunctionOptions:
    """Where a remote function's calls run.

    Attributes:
        node: the node slot every call runs on; None spreads the calls over the live nodes.
    """

    node: int | None = None

    def __post_init__(self) -> None:
        check_node(self.node)


def function_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` as remote-function options (as ``handles.actor_options``)."""
    return check_option_names("remote-function", options, FunctionOptions.__dataclass_fields__)


class RemoteFunction(Generic[R]):
    """What ``@actorrt.remote`` makes of a function: ``.remote(...)`` runs it on a node."""

    def __init__(self, fn: Callable[..., R], options: FunctionOptions = FunctionOptions()) -> None:
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            raise TypeError(f"@actorrt.remote cannot make a remote function of generator {fn.__qualname__}: "
                            f"return a list instead")
        self._fn = fn
        self._options = options
        self._blob = pickling.CachedPickle(fn)
        self.__name__ = getattr(fn, "__name__", "function")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__doc__ = fn.__doc__

    def options(self, **kwargs: Any) -> RemoteFunction[R]:
        """A copy with other ``FunctionOptions`` (``node=``)."""
        copy = RemoteFunction(self._fn, replace(self._options, **function_options(kwargs)))
        copy._blob = self._blob
        return copy

    def remote(self, *args: Any, **kwargs: Any) -> ObjectRef:
        """Submit the call; returns at once with a ref to the result.

        Raises:
            TypeError: the arguments do not fit the function's signature (nothing is sent).
        """
        check_arguments(self._fn, f"{self.__name__}.remote()", args, kwargs)
        submitter = context.current_or_start().worker.submitter
        return submitter.submit_function(self._pickled(), self.__qualname__, self._options.node, args, kwargs)

    def _pickled(self) -> bytes:
        blob = self._blob.get()
        if len(blob) > MAX_SPEC_BYTES // 2:
            raise ValueError(f"remote function {self.__qualname__} pickles to {len(blob)} bytes (what it closes "
                             f"over goes with every call, into its task spec): pass large data as an argument, "
                             f"or put() it once and pass the ref")
        return blob

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"call remote function {self.__name__} with {self.__name__}.remote(...), not "
                        f"{self.__name__}(...)")

    def __repr__(self) -> str:
        return f"RemoteFunction({self.__qualname__})"
