"""The remote-function calls a node runs: each as soon as it arrives, beside the node's actors.

A call keeps no state, so it needs no mailbox and no order: it starts on arrival (once its ref
arguments are resolved) and runs concurrently with the actors and other calls. A plain function
runs inline on the loop, like an actor method (in a thread if it may block in ``actorrt.get``:
``blocking_calls.py``); an async one interleaves at its awaits. A call
that comes again (its caller replays, or re-sends it after the node it went to died) gets its
kept result, joins the run under way, or runs again: nothing of a call is rebuilt from the store.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import os
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from actorrt.core import context
from actorrt.core.actor import ActorServices
from actorrt.core.arguments import ArgumentError, resolve_args
from actorrt.core.blocking_calls import function_may_block
from actorrt.core.serialization import error_from_exception, missing_module, object_value, runtime_error
from actorrt.core.task_spec import SenderContext
from actorrt.exceptions import task_failure
from actorrt.lineage import ids
from actorrt.objects.store import shared_part, wire_size
from actorrt.rpc import common_pb2 as pb
from actorrt.rpc import node_pb2
from actorrt.util import pickling

# Results kept for calls that come again: a caller's replay asks for them, else they run again.
log = logging.getLogger(__name__)
RESULTS_KEPT = 4096
RESULT_BYTES_KEPT = 64 * 1024 * 1024
# Functions kept unpickled, by their pickle (a caller sends the same pickle with every call).
FUNCTIONS_KEPT = 256


@dataclass
class _Call:
    spec: pb.TaskSpec
    owners: set[str]  # where the result goes: a re-send from a restarted caller adds its address
    task: asyncio.Task | None = None
    started: bool = False  # the function's code runs (a cancel comes too late)
    cancelled: bool = False
    resolved: list[bytes] = field(default_factory=list)


class FunctionCalls:
    def __init__(self, services: ActorServices) -> None:
        self.services = services
        self.running: dict[bytes, _Call] = {}
        self.executed = 0
        self._results: OrderedDict[bytes, tuple[pb.ObjectValue, int]] = OrderedDict()
        self._kept_bytes = 0
        self._functions: OrderedDict[bytes, Callable[..., Any]] = OrderedDict()

    def assign(self, spec: pb.TaskSpec) -> None:
        """Run the call ``spec`` (or answer it, if it ran or runs)."""
        kept = self._results.get(spec.task_id)
        if kept is not None:
            self._results.move_to_end(spec.task_id)
            self.services.send_result(spec.owner_address, kept[0])
        elif (call := self.running.get(spec.task_id)) is not None:
            call.owners.add(spec.owner_address)
        else:
            call = self.running[spec.task_id] = _Call(spec, {spec.owner_address})
            # In a context of its own: a call that arrives from an actor task of this node must not
            # see that task's log or sender as its own.
            call.task = contextvars.Context().run(self.services.spawn, self._run(call))

    def cancel(self, notice: node_pb2.Cancel) -> None:
        """Do not start the call if its code has not started (``actorrt.cancel``)."""
        call = self.running.get(notice.task_id)
        if call is not None and not call.started and not call.cancelled:
            call.cancelled = True
            call.task.cancel()

    def stop(self) -> None:
        for call in self.running.values():
            call.task.cancel()

    async def _run(self, call: _Call) -> None:
        spec = call.spec
        try:
            value = await self._execute(call)
        except asyncio.CancelledError:
            if not call.cancelled or asyncio.current_task().uncancel() > 0:
                raise  # the node is stopping
            value = pb.ObjectValue(object_id=ids.object_id(spec.task_id), error=runtime_error(
                pb.CANCELLED, f"call of remote function {spec.method} was cancelled before it started"))
        finally:
            del self.running[spec.task_id]
            for object_id in call.resolved:
                self.services.fetches.unborrow(object_id)
        self.executed += 1
        self._keep(spec.task_id, value)
        for owner in call.owners:
            self.services.send_result(owner, value, spec)

    async def _execute(self, call: _Call) -> pb.ObjectValue:
        spec, ft, lease = call.spec, self.services.ft, self.services.lease
        object_id = ids.object_id(spec.task_id)
        if ft.over_limit:  # back-pressure: the calls this one makes would grow the stash
            await ft.wait_below_limit()
        spec = call.spec = await ft.on_assign(spec, b"", False)  # logged like any task (WriteFirst: now)
        # The calls it makes are numbered from its own ID: a re-run makes the same ones.
        caller = SenderContext(ids.function_call(spec.task_id), current_task=spec.task_id, function=spec.method,
                               running=f"remote function {spec.method}")
        context.current_sender.set(caller)
        try:
            # No replay from the store runs a call again: its arguments' owners need not keep them.
            args, kwargs = await resolve_args(self.services.fetches, self.services.awaits, caller, spec, call.resolved,
                                              kept_for_replay=False)
            if not lease.valid():  # a node that hung may have been replaced meanwhile
                await lease.held()
            fn = self._function(spec.function, spec.method)
            call.started = True
            if function_may_block(fn):  # off the loop, which serves the node meanwhile
                result = await self.services.off_loop(functools.partial(fn, *args, **kwargs))
            else:
                result = fn(*args, **kwargs)
            if inspect.isawaitable(result):
                result = await result
            return object_value(object_id, result)
        except ArgumentError as exc:
            return pb.ObjectValue(object_id=object_id, error=exc.error)
        except asyncio.CancelledError as exc:
            if asyncio.current_task().cancelling():
                raise  # cancelled (before it started), or the node is stopping
            return pb.ObjectValue(object_id=object_id, error=error_from_exception(exc, where=self._where(spec)))
        except BaseException as exc:  # noqa: BLE001 - any user error goes back to the caller
            error = error_from_exception(exc, where=self._where(spec))
            log.warning("%s\n%s", task_failure(error.where, error.type_name, error.message), error.traceback)
            return pb.ObjectValue(object_id=object_id, error=error)

    def _where(self, spec: pb.TaskSpec) -> str:
        return f"remote function {spec.method} on node {self.services.slot} (pid {os.getpid()})"

    def _function(self, blob: bytes, name: str) -> Callable[..., Any]:
        fn = self._functions.get(blob)
        if fn is None:
            try:
                fn = self._functions[blob] = pickling.loads(blob)
            except ModuleNotFoundError as exc:
                raise missing_module(exc, f"remote function {name}") from None
            if len(self._functions) > FUNCTIONS_KEPT:
                self._functions.popitem(last=False)
        return fn

    def _keep(self, task_id: bytes, value: pb.ObjectValue) -> None:
        shared, size = shared_part(value), wire_size(value)
        if shared is not None and not self.services.shared.hold(shared):
            return  # cannot happen to a result made here; a re-send then runs the call again
        self._results[task_id] = (value, size)
        self._kept_bytes += size
        while len(self._results) > RESULTS_KEPT or (self._kept_bytes > RESULT_BYTES_KEPT and len(self._results) > 1):
            dropped, dropped_size = self._results.popitem(last=False)[1]
            self._kept_bytes -= dropped_size
            if (shared := shared_part(dropped)) is not None:
                self.services.shared.unhold(shared)

    def stats(self) -> list[node_pb2.ActorStats]:
        if not self.executed and not self.running:
            return []
        return [node_pb2.ActorStats(actor_id=ids.FUNCTIONS, class_name="(remote functions)",
                                    queued=len(self.running), executed=self.executed,
                                    results_kept_bytes=self._kept_bytes)]
