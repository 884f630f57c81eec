"""Named actors: the head's registry of names, each taken by one actor until it is killed.

A name is taken when the actor is created with ``options(name=...)``, before its creation task is
sent (atomically: of two creators of one name, one gets it and the other learns who has it), and
found from any driver or actor with ``actorrt.get_actor(name)``. Taking a name again for the same
actor (a replayed creator creates it again) is no conflict. ``actorrt.kill`` frees the actor's
names, for good: a killed actor never takes a name again (its creator's replay creates it again,
and a kill from inside an actor may reach the head before the name does). Names outlive the drivers
that made them; the head keeps them in the store too (``head_state.py``), so they outlive a head.
"""

from __future__ import annotations

from actorrt.rpc import head_pb2


class ActorNames:
    def __init__(self, by_name: dict[str, head_pb2.NamedActor] | None = None, killed: set[bytes] | None = None) -> None:
        self._by_name = dict(by_name or {})
        self._killed = set(killed or ())  # actors whose names were freed: they take none again

    def take(self, actor: head_pb2.NamedActor) -> head_pb2.NamedActor:
        """Give ``actor.name`` to ``actor`` unless another actor has it; returns who has it. A
        killed actor is told it has the name (its creator sees no conflict) and is given nothing."""
        if actor.actor_id in self._killed:
            return actor
        return self._by_name.setdefault(actor.name, actor)

    def find(self, name: str) -> head_pb2.NamedActor | None:
        return self._by_name.get(name)

    def would_take(self, actor: head_pb2.NamedActor) -> bool:
        """Whether ``take`` would give ``actor`` its name now (it is free, and the actor not killed)."""
        return actor.name not in self._by_name and actor.actor_id not in self._killed

    def held_by(self, actor_id: bytes) -> list[str]:
        return [name for name, actor in self._by_name.items() if actor.actor_id == actor_id]

    def all(self) -> list[head_pb2.NamedActor]:
        return [self._by_name[name] for name in sorted(self._by_name)]

    def free(self, actor_id: bytes) -> list[str]:
        """Free the names ``actor_id`` has, now and for good (it was killed); returns them."""
        self._killed.add(actor_id)
        names = self.held_by(actor_id)
        for name in names:
            del self._by_name[name]
        return names
