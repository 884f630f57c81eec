"""Named actors: the head's registry of names, each taken by one actor for the cluster's life.

A name is taken when the actor is created with ``options(name=...)``, before its creation task is
sent, and found from any driver or actor with ``actorrt.get_actor(name)``. Taking a name again for
the same actor (a replayed creator creates it again) is no conflict. The registry lives in the
head: like the rest of the cluster's membership, it does not outlive it.
"""

from __future__ import annotations

from actorrt.rpc import head_pb2


class ActorNames:
    def __init__(self) -> None:
        self._by_name: dict[str, head_pb2.NamedActor] = {}

    def take(self, actor: head_pb2.NamedActor) -> head_pb2.NamedActor:
        """Give ``actor.name`` to ``actor`` unless another actor has it; returns who has it."""
        return self._by_name.setdefault(actor.name, actor)

    def find(self, name: str) -> head_pb2.NamedActor | None:
        return self._by_name.get(name)
