"""The maximal consistent rollback after a failure, when actors recover in different ways.

Each actor offers the states it can be put back in: its *cuts*. A cut is where the actor stood
in its own history, written as counters per channel: how many messages it had taken from each
sender, and how many it had sent to each receiver. An actor's cuts are its checkpoints, the
start (its constructor: nothing taken, nothing sent), and, unless it failed, its present. A
failed actor whose lineage is logged offers its present too: replay rebuilds it exactly.

A choice of one cut per actor is *consistent* when, on every channel ``s -> r``:

- **no orphans**: ``r`` keeps only messages ``s`` keeps having sent. Past its cut, ``s`` runs
  again from what it is sent now, and nothing makes it send the same messages in the same order
  (a checkpoint-only actor does not record the order it took its inputs in), so a message ``r``
  took beyond ``s``'s cut may never be sent again. Likewise, ``s`` keeps only the answers to its
  calls that ``r`` keeps having taken: run again, a call may be answered otherwise;
- **no lost messages**: the messages ``s`` keeps having sent and ``r`` does not keep having
  taken go to ``r`` again, from somewhere: a durable copy (the channel is *logged*, as every
  channel into a lineage-stash actor is, in the lineage store); the sender's process, if it
  survived (it keeps what it sent until the receiver's checkpoint covers it); the sender's cut
  itself, which holds the calls it had sent and not seen answered, and sends them again when
  restored; or, for a failed sender that replays to its present, the replay, which sends again
  what it sent after its newest checkpoint.

Both rules bound a receiver's cut by its sender's and a sender's by its receiver's, and loosen as
the other side's cut moves forward. So the consistent choices are closed under taking, per actor,
the later of two cuts, and there is a greatest one: start every actor at its latest cut and move
actors back, one rule at a time, each only as far as that rule needs, until no rule is broken.
Every move keeps every actor at or after its place in the greatest consistent choice, so the
result is that choice. Giving an actor one more cut can only move the result forward.

Pure: no processes, no sockets. The runtime gathers the cuts and the channels, and restores what
the result names.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

P = TypeVar("P", bound=Hashable)  # how the caller names an actor (its id, or a name in tests)


@dataclass(frozen=True)
class Cut(Generic[P]):
    """A state an actor can be put back in. ``received``: per sender, the messages taken (a
    channel's messages are numbered from 1, so this is the last one's number); ``sent``: per
    receiver, likewise; ``resends``: per receiver, the first message of those the cut holds copies
    of and sends again when restored (through ``sent``); ``answered``: per receiver, the last of
    its messages (calls) whose answer it took, of those whose answer said more than that the
    call ran. A missing channel counts 0."""

    received: Mapping[P, int] = field(default_factory=dict)
    sent: Mapping[P, int] = field(default_factory=dict)
    resends: Mapping[P, int] = field(default_factory=dict)
    answered: Mapping[P, int] = field(default_factory=dict)


START: Cut = Cut()


@dataclass(frozen=True)
class Actor(Generic[P]):
    """What recovery can do with one actor. ``cuts``: its checkpoints, oldest first, then its
    present when it has one (``START`` is always there, below them all); ``alive``: its process
    survived, so it still holds what it sent, from ``kept_from[receiver]`` on per receiver (1 by
    default: everything); ``replays``: it failed, and its last cut is its present all the same
    (its lineage is logged)."""

    cuts: Sequence[Cut[P]]
    alive: bool = True
    kept_from: Mapping[P, int] = field(default_factory=dict)
    replays: bool = False  # failed, and its last cut is its present, which replay rebuilds

    @property
    def has_present(self) -> bool:
        return self.alive or self.replays


@dataclass(frozen=True)
class Channel(Generic[P]):
    """Messages from ``sender`` to ``receiver``, in order. ``logged``: every one has a durable
    copy, which outlives the sender (the lineage store's, when the receiver logs its lineage)."""

    sender: P
    receiver: P
    logged: bool = False


@dataclass(frozen=True)
class Resend(Generic[P]):
    """Messages ``first`` to ``last`` of a channel go to its receiver again, from ``source``:
    ``"log"``, ``"sender"`` (its surviving process), ``"cut"`` (the sender's restored cut) or
    ``"replay"`` (the sender's replay, which sends again what it sent after its checkpoint)."""

    sender: P
    receiver: P
    first: int
    last: int
    source: str


@dataclass(frozen=True)
class Frontier(Generic[P]):
    """The greatest consistent choice: ``position[actor]`` indexes ``cuts(actor)`` (0: ``START``)."""

    actors: Mapping[P, Actor[P]]
    position: Mapping[P, int]
    resends: Sequence[Resend[P]]

    def cut(self, actor: P) -> Cut[P]:
        return cuts(self.actors[actor])[self.position[actor]]

    def at_present(self, actor: P) -> bool:
        x = self.actors[actor]
        return x.has_present and self.position[actor] == len(x.cuts)

    @property
    def kept(self) -> set[P]:
        """Actors that go on from where they are: they survived and keep their present."""
        return {a for a, x in self.actors.items() if x.alive and self.at_present(a)}

    @property
    def replayed(self) -> set[P]:
        """Failed actors that replay to their present: nothing they did is lost."""
        return {a for a, x in self.actors.items() if not x.alive and self.at_present(a)}

    @property
    def rolled_back(self) -> set[P]:
        """Actors put back in a state before their present: survivors moved back, and failed
        actors restored from a checkpoint (or the start) that do not replay past it."""
        return {a for a in self.actors if not self.at_present(a)}


def cuts(actor: Actor[P]) -> list[Cut[P]]:
    """Every cut of ``actor``, oldest first: ``START``, then its own."""
    return [START, *actor.cuts]


def solve(actors: Mapping[P, Actor[P]], channels: Iterable[Channel[P]]) -> Frontier[P]:
    """The greatest consistent choice of cuts (see the module's doc). Raises ValueError if a
    channel names an actor that is not in ``actors``, or an actor's cuts are out of order."""
    channels = list(channels)
    for name, actor in actors.items():
        for earlier, later in zip(cuts(actor), cuts(actor)[1:], strict=False):
            for counts in ("received", "sent", "answered"):
                mine, after = getattr(earlier, counts), getattr(later, counts)
                if any(n > after.get(peer, 0) for peer, n in mine.items()):
                    raise ValueError(f"actor {name!r}: its cuts are not in order (a later one {counts} less)")
    for ch in channels:
        for end in (ch.sender, ch.receiver):
            if end not in actors:
                raise ValueError(f"channel {ch.sender!r} -> {ch.receiver!r} names {end!r}, which is not an actor")
    options = {a: cuts(x) for a, x in actors.items()}
    position = {a: len(c) - 1 for a, c in options.items()}
    touching: dict[P, list[int]] = defaultdict(list)
    for i, ch in enumerate(channels):
        touching[ch.sender].append(i)
        touching[ch.receiver].append(i)
    pending, queued = list(range(len(channels))), set(range(len(channels)))
    while pending:
        i = pending.pop()
        queued.discard(i)
        for actor in _settle(channels[i], actors, options, position):
            for j in touching[actor]:  # every rule on its channels is checked again
                if j not in queued:
                    queued.add(j)
                    pending.append(j)
    resends = []
    for ch in channels:
        s_cut, r_cut = options[ch.sender][position[ch.sender]], options[ch.receiver][position[ch.receiver]]
        first, last = r_cut.received.get(ch.sender, 0) + 1, s_cut.sent.get(ch.receiver, 0)
        if first <= last:
            resends.append(Resend(ch.sender, ch.receiver, first, last, _source(ch, actors[ch.sender], s_cut, r_cut)))
    return Frontier(actors, position, resends)


def consistent(actors: Mapping[P, Actor[P]], channels: Iterable[Channel[P]], position: Mapping[P, int]) -> bool:
    """Whether choosing ``cuts(actor)[position[actor]]`` for every actor breaks no rule."""
    for ch in channels:
        s_cut = cuts(actors[ch.sender])[position[ch.sender]]
        r_cut = cuts(actors[ch.receiver])[position[ch.receiver]]
        if not (_no_orphans(ch, s_cut, r_cut) and _sender_keeps(ch, actors[ch.sender], s_cut, r_cut)):
            return False
    return True


def _settle(ch: Channel[P], actors: Mapping[P, Actor[P]], options: Mapping[P, list[Cut[P]]],
            position: dict[P, int]) -> list[P]:
    """Move ``ch``'s receiver back until it keeps no orphan, then its sender until what it keeps
    having sent can reach the receiver again and it keeps no answer the receiver would not give
    again; returns the actors moved. (A channel from an actor
    to itself has one cut at both ends.)"""
    s, r = ch.sender, ch.receiver
    moved = []
    at = _latest(options[r], position[r],
                 lambda c: _no_orphans(ch, c if s == r else options[s][position[s]], c))
    if at != position[r]:
        position[r] = at
        moved.append(r)
    at = _latest(options[s], position[s],
                 lambda c: _sender_keeps(ch, actors[s], c, c if s == r else options[r][position[r]]))
    if at != position[s]:
        position[s] = at
        moved.append(s)
    return moved


def _latest(options: Sequence[Cut[P]], at: int, allowed: Callable[[Cut[P]], bool]) -> int:
    """The latest cut at or before ``at`` that ``allowed`` accepts (``START`` always is)."""
    while at > 0 and not allowed(options[at]):
        at -= 1
    return at


def _no_orphans(ch: Channel[P], s_cut: Cut[P], r_cut: Cut[P]) -> bool:
    return r_cut.received.get(ch.sender, 0) <= s_cut.sent.get(ch.receiver, 0)


def _sender_keeps(ch: Channel[P], sender: Actor[P], s_cut: Cut[P], r_cut: Cut[P]) -> bool:
    """Whether the sender may stay at ``s_cut``: what it sent reaches the receiver again, and it
    took no answer to a call that the receiver's cut did not take."""
    return (s_cut.answered.get(ch.receiver, 0) <= r_cut.received.get(ch.sender, 0)
            and _source(ch, sender, s_cut, r_cut) != "")


def _source(ch: Channel[P], sender: Actor[P], s_cut: Cut[P], r_cut: Cut[P]) -> str:
    """Where the messages the sender keeps having sent, and the receiver does not keep having
    taken, come from again: ``"none needed"``, ``"log"``, ``"sender"`` or ``"cut"``; ``""`` if
    from nowhere."""
    first, last = r_cut.received.get(ch.sender, 0) + 1, s_cut.sent.get(ch.receiver, 0)
    if first > last:
        return "none needed"
    if ch.logged:
        return "log"
    if sender.alive and sender.kept_from.get(ch.receiver, 1) <= first:
        return "sender"
    if s_cut.resends.get(ch.receiver, last + 1) <= first:
        return "cut"
    if sender.replays and s_cut is sender.cuts[-1]:
        # Replay rebuilds its present from its newest checkpoint: it sends again what it sent since.
        base = sender.cuts[-2].sent.get(ch.receiver, 0) if len(sender.cuts) > 1 else 0
        if base < first:
            return "replay"
    return ""
