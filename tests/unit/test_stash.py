"""The lineage stash's rules, without sockets: versions, TryEvict, lineage forwarding, Invariant 2."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actorrt.core.task_spec import SenderContext, build_task
from actorrt.lineage import ids
from actorrt.lineage.stash import Stash
from actorrt.rpc import common_pb2 as pb


def spec(name: str, deps: list[str] = (), version: int = 0) -> pb.TaskSpec:
    return pb.TaskSpec(task_id=name.encode(), version=version, dependencies=[d.encode() for d in deps])


def test_newest_version_wins():
    s = Stash()
    assert s.add(spec("t", ["a"], version=0))
    assert s.add(spec("t", ["b"], version=1))
    assert not s.add(spec("t", ["a"], version=0))  # stale
    assert not s.add(spec("t", ["b"], version=1))  # same
    assert list(s.get(b"t").dependencies) == [b"b"]


def test_ack_of_an_older_version_does_not_commit():
    s = Stash()
    s.add(spec("t", version=0))
    s.add(spec("t", version=1))
    assert s.ack(b"t", 0) == []
    assert b"t" in s
    assert s.ack(b"t", 1) == [b"t"]
    assert len(s) == 0


def test_tasks_that_depend_on_each_other_go_once_every_ancestor_is_committed():
    # A concurrent actor's steps: each call's later version depends on the other call's task.
    s = Stash()
    s.add(spec("root"))
    s.add(spec("a", ["root", "b"]))
    s.add(spec("b", ["a"]))
    assert s.ack(b"a", 0) == [] and s.ack(b"b", 0) == []  # committed, but behind the uncommitted root
    assert sorted(s.ack(b"root", 0)) == [b"a", b"b", b"root"]  # the cycle goes with it
    s.add(spec("c", ["d"]))
    s.add(spec("d", ["c"]))
    s.ack(b"c", 0)
    assert sorted(s.ack(b"d", 0)) == [b"c", b"d"]


def test_a_long_chain_behind_one_uncommitted_task_is_kept_then_goes_at_its_commit():
    s = Stash()
    s.add(spec("t0"))
    for i in range(1, 3000):
        s.add(spec(f"t{i}", [f"t{i - 1}"]))
    for i in range(2999, 0, -1):  # every ack finds the uncommitted root it remembered, not the chain
        assert s.ack(f"t{i}".encode(), 0) == []
    assert len(s.ack(b"t0", 0)) == 3000 and len(s) == 0


def test_committed_task_waits_for_its_uncommitted_dependency_then_cascades():
    s = Stash()
    s.add(spec("a"))
    s.add(spec("b", ["a"]))
    s.add(spec("c", ["b"]))
    assert s.ack(b"c", 0) == []  # committed, but b is still stashed
    assert s.ack(b"b", 0) == []  # committed, but a is still stashed
    assert s.is_committed(b"b") and s.is_committed(b"c")
    assert sorted(s.ack(b"a", 0)) == [b"a", b"b", b"c"]  # eviction cascades to dependents
    assert len(s) == 0 and s.evicted == 3


def test_new_version_with_other_dependencies_relinks():
    s = Stash()
    s.add(spec("x"))
    s.add(spec("t", ["x"], version=0))
    s.add(spec("t", ["y"], version=1))  # predecessor overwritten: no longer depends on x
    s.ack(b"t", 1)
    assert b"t" not in s  # x being stashed does not hold it back any more
    assert s.ack(b"x", 0) == [b"x"]


def test_lineage_reaches_uncommitted_ancestors_through_committed_ones_once_per_destination():
    s = Stash()
    s.add(spec("a"))
    s.add(spec("b", ["a"]))
    s.add(spec("c", ["b"]))
    s.ack(b"b", 0)  # committed but kept: a is not
    task = spec("d", ["c"])
    names = lambda specs: sorted(x.task_id for x in specs)  # noqa: E731
    assert names(s.uncommitted_lineage(task)) == [b"a", b"c"]  # walks through committed b to a
    # b goes along: the receiver's walks from d must reach a through it
    assert names(s.lineage_for(task, "node-1")) == [b"a", b"b", b"c"]
    assert s.lineage_for(task, "node-1") == []  # already sent there, with its lineage
    assert names(s.lineage_for(task, "node-2")) == [b"a", b"b", b"c"]  # another destination
    s.add(spec("c", ["b"], version=1))  # a new version goes again
    assert names(s.lineage_for(task, "node-1")) == [b"c"]
    assert list(s.forwarded_sizes) == [3, 0, 3, 1]


def test_max_forwards_bounds_how_often_a_task_travels():
    s = Stash(max_forwards=2)
    s.add(spec("a"))
    sent = [len(s.lineage_for(spec(f"t{i}", ["a"]), f"node-{i}")) for i in range(4)]
    assert sent == [1, 1, 0, 0]
    with pytest.raises(ValueError):
        Stash(max_forwards=-1)


def test_figure7_chain_of_three_processes():
    """A's task a1 runs on B, which submits b1 to C while a1 is uncommitted (the paper's Figure 7
    situation as we read it): C receives a1 with b1; once the store acks a1, A, B and C all drop it,
    and B's and C's stashes empty as their own tasks commit."""
    stash_a, stash_b, stash_c = Stash(), Stash(), Stash()
    a1 = spec("a1")
    stash_a.add(a1)  # SubmitTask at A
    assert stash_a.lineage_for(a1, "B") == []  # nothing uncommitted before it
    stash_b.add(a1)  # AssignTask at B
    b1 = spec("b1", ["a1"])  # submitted by a1's execution on B
    stash_b.add(b1)
    lineage = stash_b.lineage_for(b1, "C")
    assert [x.task_id for x in lineage] == [b"a1"]
    for x in [*lineage, b1]:
        stash_c.add(x)  # AssignTask at C: the forwarded lineage first
    assert stash_c.ack(b"b1", 0) == []  # b1 committed, but a1 is not: C keeps both
    for stash in (stash_a, stash_b, stash_c):
        stash.ack(b"a1", 0)
    assert len(stash_a) == 0 and len(stash_c) == 0
    assert list(stash_b.specs()) == [b1]
    assert stash_b.ack(b"b1", 0) == [b"b1"]


# ---- Invariant 2 on random task graphs and random ack orders -----------------------------------


@dataclass
class Process:
    name: str
    nondeterministic: bool
    stash: Stash
    ctx: SenderContext
    inbox: list[pb.TaskSpec] = field(default_factory=list)
    last_executed: bytes = b""
    mine: dict[bytes, pb.TaskSpec] = field(default_factory=dict)  # submitted or executed, my version
    seen: dict[bytes, pb.TaskSpec] = field(default_factory=dict)  # newest version of every spec I had
    owned: list[bytes] = field(default_factory=list)  # tasks I submitted (their results are mine)


class Cluster:
    """Processes exchanging tasks with lineage, and a store that applies writes in any order."""

    def __init__(self, n: int, nondeterministic: list[bool], max_forwards: int | None) -> None:
        self.procs = [
            Process(f"p{i}", nondeterministic[i], Stash(max_forwards), SenderContext(ids.actor_id(b"sim", i)))
            for i in range(n)
        ]
        self.store: dict[bytes, pb.TaskSpec] = {}
        self.pending: list[tuple[Process, pb.TaskSpec]] = []  # flushes not yet applied
        # Every version ever made, and the version of each dependency it was made against: a
        # version made later elsewhere (a receiver's new order) is not what older edges mean.
        self.versions: dict[tuple[bytes, int], pb.TaskSpec] = {}
        self.made_against: dict[tuple[bytes, int], dict[bytes, int]] = {}

    def made(self, task: pb.TaskSpec, against: dict[bytes, int]) -> None:
        self.versions[task.task_id, task.version] = task
        self.made_against[task.task_id, task.version] = against

    def flush(self, proc: Process, task: pb.TaskSpec) -> None:
        self.pending.append((proc, task))

    def stash_add(self, proc: Process, task: pb.TaskSpec, source: str | None = None) -> None:
        if task.version >= proc.seen.get(task.task_id, task).version:
            proc.seen[task.task_id] = task
        if proc.stash.add(task, source):
            self.flush(proc, task)

    def submit(self, src: Process, dst: Process, arg_of: bytes | None) -> None:
        task = build_task(src.ctx, dst.ctx.sender_id, "m", [], [], src.name)
        if arg_of is not None:  # a reference argument: its producer becomes a dependency
            task.argument_ids.append(ids.object_id(arg_of))
            task.dependencies.append(arg_of)
        parent, predecessor = task.dependencies[0], task.dependencies[1]
        against = {predecessor: 0}  # the sender's order: the task as it was submitted
        if arg_of is not None:
            against[arg_of] = src.seen[arg_of].version
        if parent:
            against[parent] = src.mine[parent].version  # the version src executed
        self.made(task, against)
        src.mine[task.task_id] = task
        src.seen[task.task_id] = task
        src.owned.append(task.task_id)
        self.stash_add(src, task)
        for ancestor in src.stash.lineage_for(task, dst.name):
            self.stash_add(dst, ancestor, src.name)  # lineage is stashed when it arrives, ahead of the task
        self.stash_add(dst, task, src.name)  # the receiver stashes a task on arrival
        dst.inbox.append(task)
        src.stash.mark_sent(task.task_id, dst.name)

    def execute(self, proc: Process) -> None:
        task = proc.inbox.pop(0)
        if proc.nondeterministic and proc.last_executed:
            task = pb.TaskSpec.FromString(task.SerializeToString())
            del task.dependencies[1]
            task.dependencies.insert(1, proc.last_executed)
            task.predecessor_id = proc.last_executed
            task.version += 1
            against = dict(self.made_against[task.task_id, task.version - 1])
            against[proc.last_executed] = proc.mine[proc.last_executed].version
            self.made(task, against)
            self.stash_add(proc, task)  # the sender only has the old version
        # The result goes back to its owner with the executed version and its lineage.
        owner = next(p for p in self.procs if p.name == task.owner_address)
        if owner is not proc:
            for ancestor in proc.stash.lineage_for(task, owner.name, include_self=True):
                self.stash_add(owner, ancestor, proc.name)
        proc.mine[task.task_id] = task
        proc.seen[task.task_id] = task
        proc.last_executed = task.task_id
        proc.ctx.current_task = task.task_id

    def apply_write(self, index: int) -> None:
        proc, task = self.pending.pop(index)
        held = self.store.get(task.task_id)
        if held is None or held.version < task.version:
            self.store[task.task_id] = task
        proc.stash.ack(task.task_id, self.store[task.task_id].version)

    def check_invariant(self) -> None:
        """Every uncommitted ancestor of a task a process submitted or executed is in its stash.

        Ancestors as the process knows them, else at the version its descendant was made against:
        a nondeterministic receiver's newer version (a new predecessor), made after the edge, is
        the receiver's to keep and forward, not its senders' nor theirs.
        """
        for proc in self.procs:
            for task in proc.mine.values():
                todo, visited = [proc.seen[task.task_id]], set()
                while todo:
                    spec = todo.pop()
                    against = self.made_against[spec.task_id, spec.version]
                    for dep in (d for d in spec.dependencies if d):
                        version = against[dep]
                        if (dep, version) in visited:
                            continue
                        visited.add((dep, version))
                        if dep not in proc.stash:
                            held = self.store.get(dep)
                            assert held is not None and held.version >= version, (
                                f"{proc.name}: uncommitted ancestor {dep.hex()[:8]} v{version} not stashed")
                        known = proc.seen.get(dep)
                        todo.append(known if known is not None and known.version >= version else
                                    self.versions[dep, version])


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_invariant_2_holds_on_random_graphs_and_ack_orders(data):
    n = data.draw(st.integers(2, 4), label="processes")
    nondet = data.draw(st.lists(st.booleans(), min_size=n, max_size=n), label="nondeterministic")
    cluster = Cluster(n, nondet, max_forwards=None)
    for _ in range(data.draw(st.integers(1, 60), label="steps")):
        choices = ["submit"] + (["execute"] if any(p.inbox for p in cluster.procs) else []) + (
            ["ack"] if cluster.pending else [])
        op = data.draw(st.sampled_from(choices))
        if op == "submit":
            src = data.draw(st.sampled_from(cluster.procs))
            dst = data.draw(st.sampled_from([p for p in cluster.procs if p is not src]))
            arg = data.draw(st.sampled_from([None, *src.owned]))
            cluster.submit(src, dst, arg)
        elif op == "execute":
            cluster.execute(data.draw(st.sampled_from([p for p in cluster.procs if p.inbox])))
        else:
            cluster.apply_write(data.draw(st.integers(0, len(cluster.pending) - 1)))
        cluster.check_invariant()
    # Idle: execute what is queued, apply every write; every stash drains to zero.
    while any(p.inbox for p in cluster.procs) or cluster.pending:
        for p in cluster.procs:
            while p.inbox:
                cluster.execute(p)
        while cluster.pending:
            cluster.apply_write(data.draw(st.integers(0, len(cluster.pending) - 1)))
        cluster.check_invariant()
    assert [len(p.stash) for p in cluster.procs] == [0] * n


def test_lineage_never_goes_back_to_where_it_came_from():
    a, b = Stash(), Stash()
    t1 = spec("t1")
    a.add(t1)
    b.add(t1, source="A")  # forwarded by A
    t2 = spec("t2", ["t1"])
    b.add(t2)
    assert b.lineage_for(t2, "A") == []  # A has t1
    assert [x.task_id for x in b.lineage_for(t2, "C")] == [b"t1"]
    b.mark_sent(b"t2", "A")  # t2 itself was sent to A as a task
    assert b.lineage_for(spec("t3", ["t2"]), "A") == []


def test_a_peer_that_forwarded_an_older_version_still_gets_the_newer_one_and_its_lineage():
    """Found by the property test: a peer forwarding back the version it had (v0) was taken to
    hold ours (v1, a new predecessor), so v1 and the order it records never reached it."""
    s = Stash()
    s.add(spec("t1"))
    s.add(spec("t4", ["", "t1"], version=1))  # run after t1: our new version
    s.add(spec("t4", version=0), source="p0")  # p0 forwards the version it had
    assert {x.task_id: x.version for x in s.lineage_for(spec("t7", ["t4"]), "p0")} == {b"t4": 1, b"t1": 0}


def test_a_committed_and_evicted_task_is_not_stashed_again():
    a = Stash()
    a.add(spec("t1"))
    assert a.ack(b"t1", 0) == [b"t1"]
    assert not a.add(spec("t1"))  # a peer forwarding it back: known committed
    assert b"t1" not in a
    assert a.add(spec("t1", version=1))  # a newer version is news


def test_a_result_goes_back_with_the_version_that_ran_and_its_new_lineage():
    receiver = Stash()
    x = spec("x")  # from another sender, executed first, uncommitted
    d0 = spec("d", ["parent", "prev"])  # as its owner submitted it
    receiver.add(x, source="other")
    receiver.add(d0, source="owner")
    d1 = spec("d", ["parent", "x"], version=1)  # as it ran: after x
    receiver.add(d1)
    back = receiver.lineage_for(d1, "owner", include_self=True)
    assert sorted((t.task_id, t.version) for t in back) == [(b"d", 1), (b"x", 0)]
    assert receiver.lineage_for(d1, "owner", include_self=True) == []  # once
    # A task that ran as submitted goes back with nothing: the owner has it.
    plain = Stash()
    plain.add(d0, source="owner")
    assert plain.lineage_for(d0, "owner", include_self=True) == []


def channel_spec(receiver: str, sender: str, counter: int, deps: list[str] = (), version: int = 0) -> pb.TaskSpec:
    return pb.TaskSpec(task_id=f"{receiver}<{sender}#{counter}".encode(), receiver=receiver.encode(),
                       sender=sender.encode(), task_counter=counter, version=version,
                       dependencies=[d.encode() for d in deps])


def test_a_commit_mark_evicts_the_channel_up_to_its_counter_and_no_further():
    s = Stash()
    for c in (1, 2, 3):
        s.add(channel_spec("r", "s", c, version=1))
    s.add(channel_spec("r", "other", 1))
    assert sorted(s.committed_upto(b"r", b"s", 2)) == [b"r<s#1", b"r<s#2"]
    assert b"r<s#3" in s and b"r<other#1" in s  # beyond the mark, another channel
    assert not s.add(channel_spec("r", "s", 2, version=1))  # covered: lineage coming back is not stashed
    assert s.committed_upto(b"r", b"s", 1) == []  # an older mark says nothing new


def test_a_task_a_mark_covers_stays_while_its_lineage_is_uncommitted():
    s = Stash()
    s.add(channel_spec("p", "q", 1))
    s.add(channel_spec("r", "s", 1, deps=["p<q#1"]))
    assert s.committed_upto(b"r", b"s", 1) == []  # committed, but it leads to an uncommitted ancestor
    assert s.is_committed(b"r<s#1")
    assert sorted(s.committed_upto(b"p", b"q", 1)) == [b"p<q#1", b"r<s#1"]
