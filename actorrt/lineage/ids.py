"""Stable identifiers.

Every ID is a BLAKE2b digest of its inputs, never Python's salted ``hash()``, a random number or the
clock, so a process rebuilt after a failure recomputes exactly the IDs the lost process used.
"""

from __future__ import annotations

import hashlib
import os
import struct

ID_SIZE = 16
_INDEX = struct.Struct(">I")


def _digest(*parts: bytes) -> bytes:
    # Each part length-prefixed so ("ab","c") != ("a","bc"); hashed at once (every task has an ID).
    return hashlib.blake2b(b"".join([_INDEX.pack(len(part)) + part for part in parts]), digest_size=ID_SIZE).digest()


def task_id(receiver: bytes, sender: bytes, task_counter: int) -> bytes:
    """``hash(receiver, sender, task_counter)`` of the paper's Table 1."""
    return _digest(b"task", receiver, sender, struct.pack(">Q", task_counter))


def actor_id(creator: bytes, creation_counter: int) -> bytes:
    """The ID of the ``creation_counter``-th actor that ``creator`` created."""
    return _digest(b"actor", creator, struct.pack(">Q", creation_counter))


def object_id(task: bytes, index: int = 0) -> bytes:
    """``ObjectID = TaskID + return index``."""
    return task + _INDEX.pack(index)


def producer_task(obj: bytes) -> bytes:
    """The task whose return value ``obj`` is."""
    return obj[:ID_SIZE]


# The receiver every remote-function call is counted under: a sender's calls are numbered 1, 2, ...
# wherever they run, so their IDs do not depend on which node each one was placed on.
FUNCTIONS = _digest(b"functions")


def function_call(task: bytes) -> bytes:
    """The sender ID of the calls a remote-function task makes: derived from the task alone, so a
    re-run of the task makes the same calls under the same IDs."""
    return _digest(b"function call", task)


def timer_sender(actor: bytes, timer: int) -> bytes:
    """The sender ID of the firings of ``actor``'s ``timer``-th timer: firing n is its n-th task."""
    return _digest(b"timer", actor, struct.pack(">Q", timer))


def driver_id() -> bytes:
    """A fresh ID for a driver process (drivers are not replayed, so it may be random)."""
    return _digest(b"driver", os.urandom(ID_SIZE))


def short(ident: bytes) -> str:
    """A short hex form for logs and error messages."""
    return ident[:6].hex()
