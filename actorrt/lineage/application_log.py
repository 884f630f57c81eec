"""Nondeterministic events inside a task (wall-clock time, random numbers, external reads),
recorded in the task's ``application_log`` so that a replay sees the same values.

``actorrt.record(fn)`` runs ``fn()`` and appends its value to the running task's log: a new
version of the task's spec, stashed and flushed like any other, and forwarded with the task's
outputs while uncommitted (whoever depends on the task depends on these values). A replayed task
gets the logged values back, in order, without calling ``fn``; past the end of its log (the
newest version never reached the store, so nobody depended on it) it records afresh.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from actorrt.lineage.options import MAX_SPEC_BYTES
from actorrt.rpc import common_pb2 as pb
from actorrt.util import pickling

T = TypeVar("T")

# What a kill that interrupted a task records in its log (``core/interruptions.py``): a mark for
# the runtime, which ``record`` does not hand back as the value of an event.
INTERRUPTED_MARK = "actorrt: interrupted after sends"
_INTERRUPTED_BYTES = INTERRUPTED_MARK.encode()


def is_interruption(entry: bytes) -> bool:
    """Whether log entry ``entry`` is a kill's mark (not a value some code recorded)."""
    if _INTERRUPTED_BYTES not in entry[:64]:
        return False
    value = pickling.loads(entry)
    return isinstance(value, tuple) and len(value) == 2 and value[0] == INTERRUPTED_MARK and isinstance(value[1], int)

# The most ``record`` logs for one task: the task's log goes with each of its versions.
MAX_RECORD_BYTES = MAX_SPEC_BYTES // 8


def with_entry(spec: pb.TaskSpec, entry: bytes) -> pb.TaskSpec:
    """``spec`` with ``entry`` appended to its application log: its next version."""
    out = pb.TaskSpec()
    out.CopyFrom(spec)
    out.application_log.append(entry)
    out.version = spec.version + 1
    return out


@dataclass
class RunningTask:
    """The spec version of the task running now, and its log as far as it was replayed."""

    spec: pb.TaskSpec
    position: int = 0  # next entry of spec.application_log to hand back
    replayed: bool = False  # it ran before the failure: what it sends, its receivers may have
    # The event loop the lineage stash lives on, for a task that runs in a thread of its own
    # (a method that blocks in get): its new versions reach the stash through it, in order.
    loop: asyncio.AbstractEventLoop | None = None
    sent: int = 0  # tasks it sent so far
    interrupt_after: int | None = None  # a replay of a task a kill interrupted: cancelled once it sent as many
    interrupted: bool = False
    cancel: Callable[[], object] | None = None  # cancels the asyncio task of such a replay

    def next_logged(self) -> bytes | None:
        """The entry a replay's next ``record`` hands back, without taking it (None past the log)."""
        log = self.spec.application_log
        while self.position < len(log) and is_interruption(log[self.position]):
            self.position += 1  # not an event of the task's code
        return log[self.position] if self.position < len(log) else None

    def take_logged(self) -> None:
        """Past the entry ``next_logged`` returned (a replay's event read without ``record``)."""
        self.position += 1

    def record(self, fn: Callable[[], T], on_new_version: Callable[[pb.TaskSpec], None],
               depends_on: bytes = b"", encode: Callable[[T], bytes] = pickling.dumps) -> T:
        """The logged value of this task's next event, or ``fn()``, logged through
        ``on_new_version`` (the lineage stash) before it is returned; ``depends_on``: a task
        whose lineage must be kept with this version (the event followed it); ``encode``: how
        the value is written (cloudpickle, unless it is plain data)."""
        entry = self.next_logged()
        if entry is not None:
            value = pickling.loads(entry)
        else:
            value = fn()
            entry = encode(value)
            logged = sum(map(len, self.spec.application_log)) + len(entry)
            if logged > MAX_RECORD_BYTES:
                raise ValueError(f"actorrt.record() would log {logged} bytes for this task, over the limit of "
                                 f"{MAX_RECORD_BYTES}: what a task records is written to the lineage store with "
                                 f"each of its later versions; record small values (a seed, a key, a "
                                 f"timestamp) and derive the data from them")
            self.spec = with_entry(self.spec, entry)
            if depends_on and depends_on != self.spec.task_id and depends_on not in self.spec.dependencies:
                self.spec.dependencies.append(depends_on)
            if self.loop is None:
                on_new_version(self.spec)
            else:
                self.loop.call_soon_threadsafe(on_new_version, self.spec)
        self.position += 1
        return value
