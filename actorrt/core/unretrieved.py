"""Telling the user of a failure nobody retrieved: once, and only a real one.

A task whose ref was dropped without a get or an await (a fire-and-forget call) and that failed is
logged when both have happened. Not every error value is a failure to tell:
- a re-sent call that its receiver ran already and no longer keeps the result of
  (``RESULT_NOT_KEPT``): after a recovery, a driver re-asks for the results of calls it dropped;
  they ran, nothing failed;
- a cancellation, a rollback, a lost cluster: the answer to what the user did, or told otherwise.

An actor's creation is a call whose ref its handle holds. When the constructor raised, every call
to the actor raises its death with the constructor's traceback; so the creation's error is told
only if no call raised or told that death by the time the handle goes (or the driver shuts down).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from actorrt.core.serialization import exception_from_error
from actorrt.rpc import common_pb2 as pb

# Its own logger, for users to silence: logging.getLogger("actorrt.unretrieved").disabled = True
log = logging.getLogger("actorrt.unretrieved")
# Failures that are the answer to what the user did (cancel, shutdown, a rollback they poll for),
# or no failure at all (a result dropped by design, of a call that ran).
NOT_TOLD = frozenset({pb.CANCELLED, pb.CLUSTER_LOST, pb.ROLLED_BACK, pb.RESULT_NOT_KEPT})


class UnretrievedErrors:
    def __init__(self) -> None:
        self._creations: dict[bytes, bytes] = {}  # a creation's object (its handle holds the ref) -> its actor
        self._actors: dict[bytes, bytes] = {}  # the reverse
        self._deaths_seen: set[bytes] = set()  # of those actors, the ones whose death a get raised or a report told
        self.closing = False  # the process is going away: nobody needs to hear of each failure
        self._quiet: set[bytes] = set()  # results of the runtime's own calls, whatever they are

    def created(self, actor_id: bytes, object_id: bytes) -> None:
        """This process created ``actor_id``; the ref to ``object_id``, its creation's, is its handle's."""
        self._creations[object_id] = actor_id
        self._actors[actor_id] = object_id

    def raised(self, error: pb.RemoteError) -> None:
        """A get or an await raised ``error``: the user has seen it."""
        if error.kind == pb.ACTOR_DIED and error.actor_id in self._actors:
            self._deaths_seen.add(error.actor_id)

    def dropped(self, object_id: bytes, value: pb.ObjectValue | None) -> bytes | None:
        """The last ref to ``object_id`` went without a get; ``value``: what is held for it, if
        anything. Returns the actor it created, if it was a creation's (its handle went)."""
        actor_id = self._creations.pop(object_id, None)
        seen = False
        if actor_id is not None:
            del self._actors[actor_id]
            seen = actor_id in self._deaths_seen
            self._deaths_seen.discard(actor_id)
        if value is not None and value.WhichOneof("kind") == "error" and not seen:
            self.tell(value.error)
        return actor_id

    def quiet(self, object_id: bytes) -> None:
        """Whatever comes for ``object_id`` (the runtime's own call's), nobody need hear of it."""
        self._quiet.add(object_id)

    def arrived_late(self, value: pb.ObjectValue) -> None:
        """``value`` came after its ref went: told if it is a failure someone should hear of."""
        if value.object_id in self._quiet:
            self._quiet.discard(value.object_id)
        elif value.WhichOneof("kind") == "error":
            self.tell(value.error)

    def tell(self, error: pb.RemoteError) -> None:
        """Log ``error``, a failure nobody will see otherwise, unless it is none."""
        if error.kind in NOT_TOLD or self.closing:
            return
        self.raised(error)  # a call's report of an actor's death tells its constructor's error too
        log.error("a task failed and its result was never retrieved (its ref was dropped without get or await): "
                  "%s", exception_from_error(error))

    def close(self, held: Callable[[bytes], pb.ObjectValue | None]) -> None:
        """The process goes away: tell the constructor errors no call raised (``held``: the value
        held for an object), then nothing more."""
        for object_id in list(self._creations):
            self.dropped(object_id, held(object_id))
        self.closing = True
