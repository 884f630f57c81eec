"""Which nodes go back to the last global checkpoint after a failure (``ft="checkpoint"``).

The rollback frontier (``frontier.py``) answers per actor; a node process restarts whole. So the
answer is found a node at a time: the failed nodes' actors offer only their part of the last
global checkpoint, every other actor also its present (as its process reports it, with what it
keeps of what it sent). An actor the frontier moves back takes its node with it, and the node's
other actors are solved again as failed, until no new node is named. Every other node keeps
running from where it is.

Every node goes back instead, as the global rollback always did, when:

- a driver would have to move back: it took an answer that the rolled-back actors will not give
  again, and a driver cannot be restored (its loop resumes from the checkpoint, ``rollbacks()``);
- a process took what the frontier does not see: a library's channel messages (a collective
  group), or a value by fetch, which another actor's task may have made;
- an actor the frontier rolls back would have to go back before the global checkpoint.

Senders that neither report nor are checkpointed (a node process's own calls, a driver that did
not answer) are the environment: they never move back, and the calls they made are not made
again. Pure: the head gathers the reports and restarts what the plan names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from actorrt.lineage.frontier import Actor, Channel, Cut, Frontier, solve
from actorrt.rpc import checkpoint_pb2, node_pb2

DRIVER_SLOT = -1


@dataclass(frozen=True)
class Present:
    """A live actor (or a driver's own calls), as its process reports it: its slot (-1: a
    driver), its present cut, and, per receiver, the first of its calls its process still keeps
    (sent again to a receiver that goes back)."""

    slot: int
    cut: Cut[bytes]
    kept_from: Mapping[bytes, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RollbackPlan:
    restart: frozenset[int]  # slots whose node goes back to the checkpoint (the failed ones among them)
    everyone: str = ""  # why every node goes back instead ("": only ``restart``)
    frontier: Frontier[bytes] | None = None


def plan(checkpoint: Mapping[bytes, tuple[int, Cut[bytes]]], present: Mapping[bytes, Present],
         failed: Iterable[int], opaque: Iterable[int] = ()) -> RollbackPlan:
    """The nodes to restart. ``checkpoint``: per actor in the last global checkpoint, its slot and
    cut; ``present``: the live processes' reports; ``failed``: the slots that failed (or did not
    report); ``opaque``: slots (or -1) whose processes took what the frontier does not see."""
    restart = set(failed)
    if set(opaque):
        return RollbackPlan(frozenset(restart), everyone="a process took library channel messages or fetched values, "
                                                         "which the frontier does not see")
    while True:
        actors = _actors(checkpoint, present, restart)
        frontier = solve(actors, _channels(actors))
        moved = {present[a].slot for a in frontier.rolled_back if a in present and present[a].slot not in restart}
        if DRIVER_SLOT in moved:
            return RollbackPlan(frozenset(restart), everyone="a driver took an answer that goes back with an actor",
                                frontier=frontier)
        if not moved:
            break
        restart |= moved
    too_far = [a for a in frontier.rolled_back if a in checkpoint and frontier.position[a] == 0]
    if too_far:
        return RollbackPlan(frozenset(restart), everyone=f"{len(too_far)} actors would go back before the checkpoint",
                            frontier=frontier)
    return RollbackPlan(frozenset(restart), frontier=frontier)


def _actors(checkpoint: Mapping[bytes, tuple[int, Cut[bytes]]], present: Mapping[bytes, Present],
            restart: set[int]) -> dict[bytes, Actor[bytes]]:
    actors: dict[bytes, Actor[bytes]] = {}
    for a, (slot, cut) in checkpoint.items():
        if slot in restart or a not in present:  # (not reported: its node failed, or it was killed)
            actors[a] = Actor([cut], alive=False)
    for a, p in present.items():
        if p.slot in restart:
            actors.setdefault(a, Actor([], alive=False))  # made after the checkpoint: it is lost
        else:
            taken = [checkpoint[a][1]] if a in checkpoint else []
            actors[a] = Actor([*taken, p.cut], alive=True, kept_from=p.kept_from)
    # The environment: senders known only from what others took of them.
    took: dict[bytes, dict[bytes, int]] = {}
    for a, x in actors.items():
        for c in x.cuts:
            for s, n in c.received.items():
                if s not in actors and s not in present:
                    took.setdefault(s, {})[a] = max(took.get(s, {}).get(a, 0), n)
    for s, receivers in took.items():
        actors[s] = Actor([Cut(sent=receivers)], alive=True)
    return actors


def _channels(actors: Mapping[bytes, Actor[bytes]]) -> list[Channel[bytes]]:
    """Every channel a cut names (by its messages, its copies or its answers), once. A receiver
    that is not among ``actors`` is gone (killed): what it was sent matters no more."""
    pairs: set[tuple[bytes, bytes]] = set()
    for a, x in actors.items():
        for c in x.cuts:
            pairs.update((a, r) for r in (*c.sent, *c.answered, *c.resends) if r in actors)
            pairs.update((s, a) for s in c.received)
    return [Channel(s, r) for s, r in sorted(pairs)]


def checkpoint_cut(checkpoint: checkpoint_pb2.ActorCheckpoint) -> Cut[bytes]:
    """An actor's cut in a global checkpoint: what it ran per sender, its calls per receiver, and
    the first of the calls in flight it holds copies of (sent again when it is restored)."""
    resends: dict[bytes, int] = {}
    for p in checkpoint.pending:
        if not p.spec.function:
            receiver = p.spec.receiver
            resends[receiver] = min(resends.get(receiver, p.spec.task_counter), p.spec.task_counter)
    return Cut(received={s.sender: s.last_counter for s in checkpoint.senders},
               sent={c.receiver: c.count for c in checkpoint.counters}, resends=resends)


def reported_cut(cut: node_pb2.ActorCut) -> Present:
    """A process's report of one of its actors (or of a driver's own calls)."""
    return Present(cut.slot,
                   Cut(received=_counts(cut.received), sent=_counts(cut.sent), answered=_counts(cut.answered)),
                   _counts(cut.kept_from))


def _counts(counts: Iterable[node_pb2.PeerCount]) -> dict[bytes, int]:
    return {c.peer: c.count for c in counts}
