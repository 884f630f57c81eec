"""One collective call as one process sees it: the decisions, without I/O.

Every member *contributes* (its input's place in shared memory; one member per host, that host's
leader, also names the segment the host's result goes into), then writes its part of the result
into its host's segment and says it is *done*. Each host computes the whole result itself, its
members splitting the work (a member reads the inputs of another host's members over TCP): every
element is reduced from every input in rank order wherever it is computed, so the result is the
same bits on every host and for any placement of the members. The call is complete in a process
once every member of its host is done writing into that host's segment. Failures make this a
little more than a barrier:

- A member whose process died is replayed and contributes again (the same input: its replay is
  exact); a contribution replaces the one before it from that member.
- A replayed leader makes a new result segment: parts written into the old one count no more,
  and the members write theirs again (their inputs are still there: a member's input buffer
  is reused only two calls later, which no member reaches before every member finished this one).
- A process that completed the call answers a late contribution with the result itself
  (``complete``); one whose members went past it and no longer hold the result says it is
  ``missing``, and a call that nobody can finish any more fails with an error naming it.
- A member that waited longer than its timeout asks rank 0's process to abort the call. That
  process *decides*: it aborts only while it lacks some member's contribution, and once it had
  them all it never does. Its ``done`` for rank 0 says so (for a barrier, which writes nothing, it
  sends one), and no process completes a call before it is *decided*: an aborted call fails on
  every member, a decided one completes on every member.

Every process decides the same: the same contributions, the same order of ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from actorrt.collective.ops import Op
from actorrt.objects.shared import RegionKey, key_of
from actorrt.rpc import collective_pb2 as cpb
from actorrt.rpc import common_pb2 as pb


@dataclass
class Exchange:
    gid: bytes
    seq: int
    size: int
    host: str = ""  # this process's host: the copy of the result it completes is its host's
    contributions: dict[int, cpb.Contribution] = field(default_factory=dict)
    sources: dict[int, str] = field(default_factory=dict)  # rank -> the address its contribution came from
    done: dict[int, RegionKey] = field(default_factory=dict)  # rank -> the result segment it wrote into
    local: dict[int, cpb.Contribution] = field(default_factory=dict)  # this process's members in the call
    writing: dict[int, RegionKey] = field(default_factory=dict)  # local rank -> segment it is writing into
    missing: set[int] = field(default_factory=set)  # ranks past the call whose processes lost its result
    outcome: pb.ObjectValue | None = None  # the result, once complete here
    error: str = ""  # why the call failed, the same in every process
    lent: list[pb.SharedObject] = field(default_factory=list)  # leases that came with messages: given back at the end
    told: set[str] = field(default_factory=set)  # addresses this process sent its members' part to
    decided: bool = False  # rank 0's process had every contribution: the call is never aborted

    @property
    def finished(self) -> bool:
        return self.outcome is not None or bool(self.error)

    def op(self) -> Op | None:
        """The call's op, as the first contribution here names it."""
        any_one = next(iter(self.contributions.values()), None)
        return parse_op(any_one.op) if any_one is not None else None

    def leader(self) -> int | None:
        op = self.op()
        return op.leader(self.seq, self.size) if op is not None else None

    def host_ranks(self) -> list[int]:
        """The ranks on this process's host, as their contributions say (all of them, once every
        member contributed)."""
        return [r for r in range(self.size) if r in self.contributions and self.contributions[r].host == self.host]

    def host_leader(self) -> int | None:
        """The rank that ought to give this host's result segment: its first from the leader on,
        in turn (once every member contributed)."""
        leader = self.leader()
        if leader is None or len(self.contributions) < self.size:
            return None
        return next((r for r in _from(leader, self.size) if self.contributions[r].host == self.host), None)

    def result_rank(self) -> int | None:
        """The rank whose segment is this host's result: the first, from the leader on, that gave
        one (members choose their host's leader from the view they have when they call; a stale
        view may make two)."""
        leader = self.leader()
        if leader is None:
            return None
        return next((r for r in _from(leader, self.size) if r in self.contributions
                     and self.contributions[r].host == self.host and self.contributions[r].HasField("result")), None)

    def result(self) -> pb.SharedObject | None:
        """The segment this host's result goes into."""
        rank = self.result_rank()
        return self.contributions[rank].result if rank is not None else None

    def contribute(self, rank: int, contribution: cpb.Contribution, source: str) -> None:
        """``rank``'s contribution (again, if its process was replaced)."""
        before = self.result()
        self.contributions[rank] = contribution
        self.sources[rank] = source
        after = self.result()
        if before is not None and after is not None and key_of(before) != key_of(after):
            self.writing.clear()  # into a segment that counts no more: parts are written again

    def drop_from(self, address: str) -> None:
        """The process at ``address`` died: its members' contributions that nobody here used must come again."""
        for rank, source in list(self.sources.items()):
            if source == address and rank not in self.local:
                del self.contributions[rank], self.sources[rank]

    def forget(self, rank: int) -> None:
        """``rank``'s contribution, and every part written into its segment if it led, count no more."""
        result = self.result()
        if result is not None and rank == self.result_rank():
            self.done = {r: k for r, k in self.done.items() if k != key_of(result)}
            self.writing.clear()
        self.contributions.pop(rank, None)
        self.sources.pop(rank, None)

    def on_done(self, rank: int, result: pb.SharedObject) -> None:
        """``rank`` wrote its part into ``result`` (which may be the leader's segment before this
        process hears of it: streams from different processes are not ordered)."""
        self.done[rank] = key_of(result)
        if rank == 0:  # written once rank 0's process had every contribution
            self.decided = True

    def lacks(self) -> list[int]:
        """The ranks whose contributions are not here."""
        return [r for r in range(self.size) if r not in self.contributions]

    def mismatch(self) -> str:
        """Why the members' calls do not fit together (once all contributed), or ""."""
        if len(self.contributions) < self.size:
            return ""
        first = self.contributions[0]
        for rank in range(1, self.size):
            c = self.contributions[rank]
            if c.op != first.op:
                return f"rank 0 called {first.op} and rank {rank} called {c.op} as call #{self.seq} of the group"
            same_shape = parse_op(c.op).kind in ("allreduce", "reduce_scatter", "allgather")
            if same_shape and (c.dtype != first.dtype or list(c.shape) != list(first.shape)):
                return (f"{c.op.split(':')[0]} needs arrays of one shape and dtype in every member: rank 0 passed "
                        f"{_described(first)} and rank {rank} passed {_described(c)}")
        return ""

    def ready_to_write(self, rank: int) -> bool:
        """Whether local ``rank`` can write its part now (everything it reads is here)."""
        result = self.result()
        if self.finished or result is None or self.writing.get(rank) == key_of(result) \
                or self.done.get(rank) == key_of(result):
            return False
        if len(self.contributions) < self.size or self.mismatch():
            return False
        return True

    def complete(self) -> bool:
        op = self.op()
        if op is None or len(self.contributions) < self.size or not self.decided:
            return False
        if not op.has_result:
            return True  # a barrier: everyone came
        result = self.result()
        return result is not None and all(self.done.get(r) == key_of(result) for r in self.host_ranks())

    def cannot_finish(self) -> bool:
        """Some member went past the call, its process no longer holds the result, and every
        other member answered: nobody can finish it any more."""
        return bool(self.missing) and not self.finished and \
            all(r in self.missing or r in self.contributions for r in range(self.size))


def _from(start: int, size: int) -> list[int]:
    return [(start + i) % size for i in range(size)]


def parse_op(text: str) -> Op:
    kind, _, arg = text.partition(":")
    if kind == "broadcast":
        return Op(kind, src_rank=int(arg))
    return Op(kind, reduce=arg)


def _described(c: cpb.Contribution) -> str:
    return f"shape {tuple(c.shape)} {c.dtype}"
