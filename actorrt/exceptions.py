"""Exceptions raised by actorrt.

The tree::

    ActorRTError
    ├── TaskError              a remote method raised; carries the remote type, message, traceback
    ├── ActorDiedError         the actor's node died or its constructor failed
    ├── RolledBackError        ft="checkpoint": a failure rolled the cluster back to its last checkpoint
    ├── ReplayDivergedError    a replayed actor re-sent a task other than the one its receiver ran
    ├── UnknownActorError      the handle names an actor its node does not host
    ├── ObjectLostError        an object's value cannot be found anywhere
    ├── GetTimeoutError        also a TimeoutError: ``get`` ran out of time
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

    Attributes:
        type_name: qualified name of the remote exception's type.
        remote_message: ``str()`` of the remote exception.
        remote_traceback: the formatted traceback from the remote process.
    """

    def __init__(self, type_name: str, remote_message: str, remote_traceback: str) -> None:
        self.type_name = type_name
        self.remote_message = remote_message
        self.remote_traceback = remote_traceback
        super().__init__(f"{type_name}: {remote_message}\n\nRemote traceback:\n{remote_traceback}")

    def __reduce__(self):
        return (type(self), (self.type_name, self.remote_message, self.remote_traceback))


class ActorDiedError(ActorRTError):
    """The actor is gone: its node process died, or its constructor raised."""


class RolledBackError(ActorRTError):
    """With ``ft="checkpoint"`` (the global-rollback baseline): a node failed, so every actor went
    back to the last global checkpoint; this task's effects are gone. Resubmit from there."""


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


class NotInitializedError(ActorRTError):
    """The API was used without a running ``actorrt.init()``."""


class ClusterError(ActorRTError):
    """Starting, reaching or authenticating with the cluster failed."""


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
