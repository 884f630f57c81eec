"""The head's registry of names: one actor per name, atomically; a killed actor's names are free
for good, even if its creator's replay asks for them again."""

from __future__ import annotations

from actorrt.cluster.actor_names import ActorNames
from actorrt.rpc import head_pb2


def _actor(name: str, actor_id: bytes, class_name: str = "Counter") -> head_pb2.NamedActor:
    return head_pb2.NamedActor(name=name, actor_id=actor_id, class_name=class_name, slot=0)


def test_a_name_goes_to_the_first_and_the_second_learns_who_has_it():
    names = ActorNames()
    assert names.take(_actor("a", b"1")).actor_id == b"1"
    assert names.take(_actor("a", b"2", "Other")).actor_id == b"1"  # the holder, not the asker
    assert names.take(_actor("a", b"1")).actor_id == b"1"  # a replayed creator: no conflict
    assert [a.name for a in names.all()] == ["a"]


def test_a_kill_frees_the_names_for_good():
    names = ActorNames()
    names.take(_actor("b", b"1"))
    names.take(_actor("a", b"1"))
    names.take(_actor("c", b"2"))
    assert names.free(b"1") == ["b", "a"]
    assert [a.name for a in names.all()] == ["c"] and names.find("a") is None
    assert names.take(_actor("a", b"1")).actor_id == b"1"  # a replay asks again: told yes, given nothing
    assert names.find("a") is None
    assert names.take(_actor("a", b"3")).actor_id == b"3"  # another actor may take it
    assert names.free(b"1") == []


def test_a_kill_that_reaches_the_head_before_the_name_wins():
    names = ActorNames()
    assert names.free(b"1") == []  # an actor created a named actor and killed it at once
    names.take(_actor("a", b"1"))
    assert names.all() == []
