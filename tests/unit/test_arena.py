"""The arena's spares (objects/arena.py): a segment kept for replays has a pre-faulted spare of its
size made beside it, so the next writer of that size reuses a segment instead of faulting in a
fresh one; a kept segment is never handed out again until it is let go; spares stay within the
pinned budget. Real memfds, no cluster."""

from __future__ import annotations

import pytest

from actorrt.objects.arena import Arena, size_class
from tests.support.waiting import eventually

MB = 1 << 20
BUDGET = 64 * MB


@pytest.fixture
def arena():
    arena = Arena(pool_bytes=BUDGET)
    yield arena
    arena.close()


def test_a_kept_segment_gets_a_spare_that_the_next_writer_reuses(arena):
    kept = arena.allocate(4 * MB)
    arena.keep(kept, BUDGET)
    eventually(lambda: arena.spares, timeout=10, what="a spare")
    assert arena.stats()["pooled_bytes"] == size_class(4 * MB)
    following = arena.allocate(4 * MB)
    assert following is not kept
    assert arena.stats()["created"] == 1 and arena.stats()["reused"] == 1  # no page faulted in on its path


def test_a_kept_segment_is_never_handed_out_until_it_is_let_go(arena):
    kept = arena.allocate(2 * MB)
    kept.view[:5] = b"first"
    arena.keep(kept, BUDGET)
    others = [arena.allocate(2 * MB) for _ in range(6)]
    assert all(s is not kept for s in others)
    assert bytes(kept.view[:5]) == b"first"
    for segment in others:
        arena.recycle(segment)
    arena.recycle(kept)  # the receiver's checkpoint let it go: back to the pool
    assert kept in [arena.allocate(2 * MB) for _ in range(len(others) + 1)]


def test_a_writer_waits_for_the_spare_under_way_rather_than_faulting_in_another(arena):
    kept = arena.allocate(16 * MB)
    arena.keep(kept, BUDGET)
    arena.allocate(16 * MB)  # at once: the spare is likely still being made
    assert arena.stats()["created"] == 1
    assert arena.spares == 1


def test_no_spare_past_the_pinned_budget(arena):
    kept = arena.allocate(8 * MB)
    arena.keep(kept, 12 * MB)  # kept and a spare would be 16 MB
    arena.allocate(8 * MB)  # so no spare is under way: this one is faulted in on the writer's path
    assert arena.spares == 0 and arena.stats()["created"] == 2


def test_a_spare_is_made_only_when_none_of_its_size_is_idle(arena):
    idle = arena.allocate(4 * MB)
    arena.recycle(idle)
    kept = arena.allocate(4 * MB)
    other = arena.allocate(4 * MB)
    arena.recycle(other)  # one idle of the size when the first is kept
    arena.keep(kept, BUDGET)
    assert arena.spares == 0 and arena.stats()["pooled_bytes"] == size_class(4 * MB)


def test_closing_while_a_spare_is_made_leaks_nothing():
    arena = Arena(pool_bytes=BUDGET)
    kept = arena.allocate(32 * MB)
    arena.keep(kept, BUDGET)
    arena.close()
    assert arena.stats()["pooled_bytes"] == 0
    with pytest.raises(ValueError):
        kept.view[0]  # closed with the arena
