"""Which nodes go back to the last global checkpoint after a failure (``ft="checkpoint"``).

The rollback frontier (``frontier.py``) answers per actor; a node process restarts whole. So the
answer is found a node at a time: the failed nodes' actors offer only their part of the last
global checkpoint, every other actor also its present (as its process reports it, with what it
keeps of what it sent). An actor the frontier moves back takes its node with it, and the node's
other actors are solved again as failed, until no new node is named. Every other node keeps
running from where it is.

**Selective re-execution.** A failed actor goes back to its checkpoint, and what it did since is
lost, unless doing it again is sure to give the same. It is, for a deterministic actor (created
with ``nondeterministic=False``, one call at a time, no timers; it records nothing with
``actorrt.record``, which nothing logs here) whose marks say that since its checkpoint it took
the calls of one sender only and called nobody, when that sender survived and keeps those calls.
Restored, it takes them again before any other's (``first``), and gives the same answers. The
frontier then counts it as replaying to its present, as a logged actor does, and nobody who took
its answers goes back: in a training loop whose workers each take their iterations from the
driver, a failure costs the lost workers' iterations since their checkpoint, and the survivors
keep theirs.

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

from actorrt.lineage.checkpoints import FROM, MORE
from actorrt.lineage.frontier import Actor, Channel, Cut, Frontier, solve
from actorrt.rpc import checkpoint_pb2, node_pb2

DRIVER_SLOT = -1


@dataclass(frozen=True)
class Present:
    """A live actor (or a driver's own calls), as its process reports it: its slot (-1: a
    driver), its present cut, per receiver the first of its calls its process still keeps (sent
    again to a receiver that goes back), and which of its senders are outside any actor task
    (drivers, node processes: they never go back)."""

    slot: int
    cut: Cut[bytes]
    kept_from: Mapping[bytes, int] = field(default_factory=dict)
    outside: frozenset[bytes] = frozenset()


@dataclass(frozen=True)
class Restorable:
    """An actor's part of the global checkpoint: its slot, its cut, whether it is deterministic
    (``nondeterministic=False``, one call at a time, no timers), and what it marked it did since:
    ``from-<sender hex>``, it took that sender's calls; ``more``, another's too, or it called."""

    slot: int
    cut: Cut[bytes]
    deterministic: bool = False
    since: frozenset[str] = frozenset()


@dataclass(frozen=True)
class RollbackPlan:
    restart: frozenset[int]  # slots whose node goes back to the checkpoint (the failed ones among them)
    everyone: str = ""  # why every node goes back instead ("": only ``restart``)
    frontier: Frontier[bytes] | None = None
    # Actors done again: the sender whose calls each takes first, and up to which counter.
    first: Mapping[bytes, tuple[bytes, int]] = field(default_factory=dict)
    manifest: int = 0  # the global checkpoint that every node going back restores (0: none)


def plan(checkpoint: Mapping[bytes, Restorable], present: Mapping[bytes, Present],
         failed: Iterable[int], opaque: Iterable[int] = ()) -> RollbackPlan:
    """The nodes to restart. ``checkpoint``: the actors in the last global checkpoint;
    ``present``: the live processes' reports; ``failed``: the slots that failed (or did not
    report); ``opaque``: slots (or -1) whose processes took what the frontier does not see."""
    restart = set(failed)
    if set(opaque):
        return RollbackPlan(frozenset(restart), everyone="a process took library channel messages, fetched values or "
                                                         "remote functions' calls, which the frontier does not see")
    if _strangers(checkpoint, present):
        return RollbackPlan(frozenset(restart), everyone="an actor took calls or answers from an actor nobody knows "
                                                         "(lost with its node, made after the checkpoint)")
    while True:
        actors, firsts = _actors(checkpoint, present, restart)
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
    first = {a: f for a, f in firsts.items() if a in frontier.replayed}
    return RollbackPlan(frozenset(restart), frontier=frontier, first=first)


def _strangers(checkpoint: Mapping[bytes, Restorable], present: Mapping[bytes, Present]) -> set[bytes]:
    """Actors that live ones took calls or answers from since, and that neither report nor are
    in the checkpoint: what they did, and whether they go back, nobody can tell."""
    outside = {s for p in present.values() for s in p.outside}
    known = {*checkpoint, *present}
    took = {s for p in present.values() for s in p.cut.received if s not in outside}
    took |= {r for p in present.values() for r, n in p.cut.answered.items() if n}
    return took - known


def _actors(checkpoint: Mapping[bytes, Restorable], present: Mapping[bytes, Present],
            restart: set[int]) -> tuple[dict[bytes, Actor[bytes]], dict[bytes, tuple[bytes, int]]]:
    """The frontier's actors, and for those that may be done again, the calls each takes first."""
    alive = {a: p for a, p in present.items() if p.slot not in restart}
    failed = {a for a, r in checkpoint.items() if r.slot in restart or a not in alive}
    actors: dict[bytes, Actor[bytes]] = {}
    firsts: dict[bytes, tuple[bytes, int]] = {}
    for a in failed:  # (not reported: its node failed, or it was killed)
        again, first = _done_again(a, checkpoint, alive)
        actors[a] = Actor([checkpoint[a].cut, *again], alive=False, replays=bool(again))
        if first is not None:
            firsts[a] = first
    for a, p in present.items():
        if p.slot in restart:
            actors.setdefault(a, Actor([], alive=False))  # made after the checkpoint: it is lost
        else:
            taken = [_as_reported(checkpoint[a].cut, p.cut)] if a in checkpoint else []
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
    return actors, firsts


def _as_reported(earlier: Cut[bytes], now: Cut[bytes]) -> Cut[bytes]:
    """An actor's checkpoint cut without the senders its report leaves out (its own timers)."""
    received = {s: n for s, n in earlier.received.items() if s in now.received}
    return Cut(received=received, sent=earlier.sent, resends=earlier.resends, answered=earlier.answered)


def _done_again(actor: bytes, checkpoint: Mapping[bytes, Restorable],
                alive: Mapping[bytes, Present]) -> tuple[list[Cut[bytes]], tuple[bytes, int] | None]:
    """The present that doing again what a failed ``actor`` did since its checkpoint is sure to
    rebuild, as a cut (empty: none is), and its sender's calls it must take first, up to which.

    Its marks (``Restorable.since``) say it took calls of one sender only and called nobody. That
    sender must be alive and keep every call after the checkpoint: restored, the actor takes them
    again, those first (whatever else arrives waits), and so does what it did."""
    restored = checkpoint[actor]
    if not restored.deterministic or MORE in restored.since:
        return [], None
    received, first = dict(restored.cut.received), None
    for mark in restored.since:  # (one at most)
        sender = bytes.fromhex(mark.removeprefix(FROM))
        p = alive.get(sender)
        if p is None or p.kept_from.get(actor, 1) > received.get(sender, 0) + 1:
            return [], None  # its calls since are gone
        received[sender] = max(received.get(sender, 0), p.cut.sent.get(actor, 0))
        first = (sender, received[sender])
    sent = dict(restored.cut.sent)
    for r, p in alive.items():  # what it made is made again: at least what anyone took
        if actor in p.cut.received:
            sent[r] = max(sent.get(r, 0), p.cut.received[actor])
    return [Cut(received=received, sent=sent)], first


def _channels(actors: Mapping[bytes, Actor[bytes]]) -> list[Channel[bytes]]:
    """Every channel a cut names, once. A receiver
    that is not among ``actors`` is gone (killed): what it was sent matters no more."""
    pairs: set[tuple[bytes, bytes]] = set()
    for a, x in actors.items():
        for c in x.cuts:
            pairs.update((a, r) for r in c.sent if r in actors)  # (what it answered or resends it sent)
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
                   _counts(cut.kept_from), frozenset(cut.outside))


def _counts(counts: Iterable[node_pb2.PeerCount]) -> dict[bytes, int]:
    return {c.peer: c.count for c in counts}
