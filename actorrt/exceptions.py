"""Exceptions raised by actorrt.

The tree::

    ActorRTError
    ├── TaskError              a remote method raised; carries the remote type, message, traceback,
    │                          and is an instance of the remote exception's type too
    ├── ActorDiedError         the actor's node died or its constructor failed
    ├── RolledBackError        ft="checkpoint": a failure rolled the cluster back to its last checkpoint
    ├── ReplayDivergedError    a replayed actor re-sent a task other than the one its receiver ran
    ├── UnknownActorError      the handle names an actor its node does not host
    ├── ObjectLostError        an object's value cannot be found anywhere
    ├── GetTimeoutError        also a TimeoutError: ``get`` ran out of time
    ├── TaskCancelledError     ``cancel`` stopped the task before it started
    ├── DeadlockError          actors' tasks awaited each other's results in a cycle
    ├── NotInitializedError    the API was used before ``init()`` (or after ``shutdown()``)
    ├── ClusterError           starting, reaching or authenticating with a cluster failed
    │   └── StaleIncarnationError  this node process was declared dead and replaced: it stops
    ├── ActorMethodError       also an AttributeError: the actor class has no such method
    └── SinkConflictError      an exactly-once sink found different bytes where it wrote before
"""

from __future__ import annotations


class ActorRTError(Exception):
    """Root of every exception actorrt raises."""


class TaskError(ActorRTError):
    """A remote method raised.

    The error ``get`` raises is also an instance of the remote exception's type when that type
    reaches the caller (``except ValueError`` catches a method's ``ValueError``), as in Ray: its
    class derives from both (``TaskError(ValueError)``), and attributes of the remote exception
    are readable on it.

    Attributes:
        type_name: qualified name of the remote exception's type.
        remote_message: ``str()`` of the remote exception.
        remote_traceback: the formatted traceback from the remote process (the method's frames).
        cause: the remote exception itself, if it could be sent, else None.
        where: the task that raised, e.g. ``"Parser.parse on node 0 (pid 4242)"`` (may be empty).
    """

    def __init__(self, type_name: str, remote_message: str, remote_traceback: str,
                 cause: BaseException | None = None, where: str = "") -> None:
        self.type_name = type_name
        self.remote_message = remote_message
        self.remote_traceback = remote_traceback
        self.cause = cause
        self.where = where
        # Not super().__init__: in a class that also derives from the remote type, that would be
        # the remote type's constructor, whose arguments are its own.
        Exception.__init__(self, f"{task_failure(where, type_name, remote_message)}\n\n"
                                 f"Remote traceback:\n{remote_traceback}")

    def __str__(self) -> str:  # not the remote type's (KeyError's quotes its argument)
        return str(self.args[0]) if self.args else ""

    def __getattr__(self, name: str):
        cause = self.__dict__.get("cause")
        if cause is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(cause, name)

    def __reduce__(self):
        # The remote type travels too when only the type came across (an instance that did not pickle).
        cause = self.cause if self.cause is not None else self.__dict__.get("_cause_type")
        return (task_error, (self.type_name, self.remote_message, self.remote_traceback, cause, self.where))


def task_failure(where: str, type_name: str, message: str) -> str:
    """One line for people: ``Parser(3f2a).parse on node 0 (pid 4242) raised ValueError: ...``."""
    return f"{where + ' raised ' if where else ''}{type_name.removeprefix('builtins.')}: {message}"


_dual_classes: dict[type, type] = {}


def task_error(type_name: str, remote_message: str, remote_traceback: str,
               cause: BaseException | type | None = None, where: str = "") -> TaskError:
    """The ``TaskError`` for a remote exception: an instance of its type too when ``cause`` (the
    exception or its class) is an ``Exception`` type that can be combined with ``TaskError``."""
    if isinstance(cause, TaskError):  # re-raised by a task that awaited it: the original counts
        type_name, remote_message, where = cause.type_name, cause.remote_message, cause.where
        cause = cause.cause if cause.cause is not None else cause.__dict__.get("_cause_type")
    cause_type = cause if isinstance(cause, type) else type(cause) if cause is not None else None
    instance = cause if isinstance(cause, BaseException) else None
    if cause_type is None or not issubclass(cause_type, Exception) or issubclass(cause_type, TaskError):
        return TaskError(type_name, remote_message, remote_traceback, instance, where)
    cls = _dual_classes.get(cause_type)
    if cls is None:
        try:
            cls = type(f"TaskError({cause_type.__name__})", (TaskError, cause_type), {"__module__": __name__})
        except TypeError:  # a type that cannot be a base (final, or a conflicting layout)
            return TaskError(type_name, remote_message, remote_traceback, instance, where)
        _dual_classes[cause_type] = cls
    try:  # a type whose __new__ wants arguments of its own (ExceptionGroup) cannot be made this way
        error = cls.__new__(cls)
        TaskError.__init__(error, type_name, remote_message, remote_traceback, instance, where)
    except Exception:  # noqa: BLE001 - then the caller gets what it always gets: a TaskError
        return TaskError(type_name, remote_message, remote_traceback, instance, where)
    error._cause_type = cause_type
    return error


class ActorDiedError(ActorRTError):
    """The actor is gone: its node process died, or its constructor raised."""


class RolledBackError(ActorRTError):
    """With ``ft="checkpoint"``: a node failed and every actor went back to the last global
    checkpoint (this driver had taken an answer that went back); this task's effects are gone.
    Resubmit from there."""


class ReplayDivergedError(ActorRTError):
    """A replayed actor re-sent a task whose method or arguments differ from the task its receiver
    ran before the failure: the replay is not reproducing the past. The actor depends on something
    its lineage does not record (a clock, a random draw, an outside read not made through
    ``actorrt.record``), or more than ``max_forwards`` processes failed at once. The receiver keeps
    what it saw; the replayed actor is stopped (its calls raise ``ActorDiedError`` saying why)."""


class UnknownActorError(ActorRTError):
    """The node the handle points to hosts no such actor."""


class ObjectLostError(ActorRTError):
    """An object's value is not held by its owner any more (the owner died)."""


class GetTimeoutError(ActorRTError, TimeoutError):
    """``get`` did not see the value within its timeout."""


class TaskCancelledError(ActorRTError):
    """``actorrt.cancel`` reached the task before it started: it never ran (and a replay after a
    failure does not run it either)."""


class DeadlockError(ActorRTError):
    """An actor's task awaited a result that could never come: the task making it waits, through a
    cycle of actors (each runs one task at a time), for the awaiting task itself. The message names
    the cycle. Every await of the cycle raises it, and a replay after a failure raises it again at
    the same await."""


class NotInitializedError(ActorRTError):
    """The API was used without a running ``actorrt.init()``."""


class ClusterError(ActorRTError):
    """Starting, reaching or authenticating with the cluster failed."""


class HeadUnavailableError(ClusterError):
    """What needs the head (looking up or taking an actor's name, killing a node, the cluster's
    stats) found none answering within its bound: it is down or restarting. Calls between running
    actors do not need it and go on meanwhile."""


class StaleIncarnationError(ClusterError):
    """Raised inside a node process that the cluster declared dead (it hung past the heartbeat
    timeout) and whose slot a newer incarnation serves: the lineage store refuses its writes, and
    the process exits without acting any further."""


class ActorMethodError(ActorRTError, AttributeError):
    """The actor's class has no public method of that name."""


class SinkConflictError(ActorRTError):
    """An exactly-once sink was about to write output that contradicts what it wrote before.

    A replay after a failure repeats a committed task exactly, so this means the task emitted
    without ``commit_lineage()`` first, or depends on something the lineage does not record.
    """
