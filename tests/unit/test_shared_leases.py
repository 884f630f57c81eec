"""Leases of shared segments (objects/shared.py), without sockets: several ``SharedObjects`` in this
process stand for processes of one host, each with its own address, and their values and notices
travel on FIFO streams, one per ordered pair, delivered in whatever order a test picks. A stream
that breaks loses what was queued on it past some point, whether or not the creator hears it
ended; what is sent after goes on a new stream, with the next serial, and what is left of the old
one may still come after it. Every receiver checks each message's serial before handling it, as
the runtime checks each batch's (objects/traffic.py ``LostNotices``). A creator must never pool a
segment while a holder maps it or may still open it (every use writes its own tag into the
segment, and every reader checks it), and must pool it once every holder let go, passed on or
not. Real memfds."""

from __future__ import annotations

import itertools
import struct
from collections import defaultdict, deque
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actorrt.objects.arena import PAGE, Arena, Segment
from actorrt.objects.shared import RegionKey, SharedObjects, key_of
from actorrt.objects.traffic import LostNotices
from actorrt.rpc import common_pb2 as pb

C = "creator:1"
HOLDERS = ["p:1", "x:1", "y:1"]
_pids = itertools.count(1000)  # each simulated process's own (they all share this test's)


class RecordingArena(Arena):
    """The creator's arena, which remembers every use it pooled again."""

    def __init__(self) -> None:
        super().__init__(pool_bytes=64 * PAGE)
        self.recycled: set[tuple[int, int]] = set()

    def recycle(self, segment: Segment) -> None:
        self.recycled.add((segment.inode, segment.generation))
        super().recycle(segment)


class Proc:
    """A process: what its store keeps, the mappings its readers hold."""

    def __init__(self, net: Net, address: str, arena: Arena | None = None) -> None:
        self.net, self.address = net, address
        self.shared = SharedObjects("host", address, self._notify, arena)
        self.pid = next(_pids)
        self.lost_notices = LostNotices(self.shared)
        self.kept: list[pb.SharedObject] = []
        self.maps: list[tuple[RegionKey, list[memoryview]]] = []
        self.alive = True

    def _notify(self, creator: str, kind: str, key: RegionKey, count: int, holder: str) -> None:
        self.net.enqueue(self.address, creator, (kind, key, count, holder))

    def arrive(self, shared: pb.SharedObject, how: str) -> None:
        """As ``SharedTraffic.arrived``: held while taken, kept or mapped or not, the lease accounted for."""
        if not self.shared.hold(shared):  # the process it names let go, or died: given back at once
            self.shared.received(shared)
            return
        if how == "keep":
            self.kept.append(shared)
        else:
            if how == "map":
                self.maps.append((key_of(shared), self.shared.read(shared)))
            self.shared.unhold(shared)
        self.shared.received(shared)

    def let_go(self, i: int) -> None:
        self.shared.unhold(self.kept.pop(i % len(self.kept)))

    def unmap(self, i: int) -> None:
        del self.maps[i % len(self.maps)]  # the views go, and with them the mapping

    def holding(self) -> list[tuple[RegionKey, bytes]]:
        """What this process reads now, by use: from each value it keeps, and each mapping."""
        out = [(k, bytes(views[0][:8])) for k, views in self.maps]
        for shared in self.kept:
            views = self.shared.read(shared)
            out.append((key_of(shared), bytes(views[0][:8])))
            del views
        return out


class Net:
    def __init__(self, holders: list[str] = HOLDERS) -> None:
        # (sender, receiver) -> (serial of the stream it went on, message), oldest first
        self.streams: dict[tuple[str, str], deque[tuple[int, tuple[Any, ...]]]] = defaultdict(deque)
        self.serials: dict[tuple[str, str], int] = defaultdict(lambda: 1)  # of each pair's stream now
        self.unheard: list[str] = []  # streams that broke and whose end the creator has yet to hear of
        self.arena = RecordingArena()
        self.procs = {C: Proc(self, C, self.arena)} | {h: Proc(self, h) for h in holders}
        self.tags: dict[RegionKey, bytes] = {}  # what each use of a segment holds
        self.writes = 0

    @property
    def creator(self) -> Proc:
        return self.procs[C]

    def write(self) -> pb.SharedObject:
        """The creator writes a value and keeps it."""
        self.writes += 1
        tag = struct.pack("<Q", self.writes)
        shared = self.creator.shared.write([memoryview(tag * (PAGE // 8))])
        self.tags[key_of(shared)] = tag
        self.creator.shared.hold(shared)
        self.creator.kept.append(shared)
        return shared

    def lent_to_p(self) -> None:
        """A new object, lent to p, which keeps it; the creator keeps nothing of it itself."""
        self.write()
        self.send(C, "p:1")
        self.creator.let_go(0)
        self.deliver(C, "p:1")

    def send(self, src: str, dst: str, i: int = 0) -> None:
        """``src`` sends one of the values it keeps to ``dst`` (lent, or passed on)."""
        proc = self.procs[src]
        descriptor = proc.shared.lend(proc.kept[i % len(proc.kept)], dst)
        if descriptor is not None:
            copy = pb.SharedObject()
            copy.CopyFrom(descriptor)
            self.enqueue(src, dst, ("value", copy))

    def enqueue(self, src: str, dst: str, message: tuple[Any, ...]) -> None:
        self.streams[(src, dst)].append((self.serials[(src, dst)], message))

    def deliver(self, src: str, dst: str, how: str = "keep", serial: int | None = None) -> None:
        """The next message from ``src`` to ``dst``: the oldest, or the oldest on stream ``serial``
        (what is left of a broken stream and what goes on the new one arrive in any order)."""
        queue = self.streams[(src, dst)]
        at = 0 if serial is None else next(i for i, (n, _) in enumerate(queue) if n == serial)
        serial, message = queue[at]
        del queue[at]
        proc = self.procs[dst]
        if not proc.alive:
            return
        proc.lost_notices.heard(src, "host", self.procs[src].pid, serial)  # before handling it, as on_batch
        if message[0] == "value":
            proc.arrive(message[1], how)
        elif message[0] == "release":
            proc.shared.on_release(src, message[1], message[2])
        else:
            proc.shared.on_passed(message[1], message[3])

    def deliver_all(self) -> None:
        while any(self.streams.values()):
            for (src, dst), queue in list(self.streams.items()):
                while queue:
                    self.deliver(src, dst)

    def die(self, address: str, kept_on_streams: int | dict[str, int]) -> None:
        """``address`` dies: of what it queued, each stream delivers only the first messages (as
        many as ``kept_on_streams`` says, for each receiver)."""
        proc = self.procs[address]
        proc.alive = False
        for (src, dst), queue in self.streams.items():
            if src == address:
                kept = kept_on_streams if isinstance(kept_on_streams, int) else kept_on_streams.get(dst, 0)
                while len(queue) > kept:
                    queue.pop()
        proc.maps.clear()
        proc.kept.clear()
        proc.shared.close()

    def break_stream(self, address: str, kept_on_stream: int, heard: str = "now") -> None:
        """The stream between ``address`` and the creator ends, both alive: what was queued on it
        past the first messages is lost, and what either sends the other from now on goes on a new
        stream. The creator hears it ended ``heard``: "now", "later" (``hear``) or "never"."""
        for pair in ((address, C), (C, address)):
            queue, serial, sent = self.streams[pair], self.serials[pair], 0
            for entry in list(queue):
                if entry[0] == serial:
                    sent += 1
                    if sent > kept_on_stream:
                        queue.remove(entry)
            self.serials[pair] = serial + 1
        if heard == "later":
            self.unheard.append(address)
        elif heard == "now" and self.creator.alive:
            self.creator.shared.holder_lost(address, dead=False)

    def hear(self, i: int) -> None:
        """The creator hears late that a stream broke (the router's own detection, as before)."""
        address = self.unheard.pop(i % len(self.unheard))
        if self.creator.alive:
            self.creator.shared.holder_lost(address, dead=False)

    def check(self) -> None:
        """No use is pooled while a live process reads it, and what it reads is that use's."""
        for proc in self.procs.values():
            if proc.alive:
                for key, tag in proc.holding():
                    assert (key[1], key[2]) not in self.arena.recycled, f"{proc.address} holds a use pooled again"
                    assert tag == self.tags[key], f"{proc.address} reads another use's bytes"

    def in_use(self) -> int:
        return self.creator.shared.stats().in_use


@pytest.fixture
def net():
    net = Net()
    yield net
    for proc in net.procs.values():
        proc.maps.clear()
        proc.shared.close()


def test_a_segment_passed_on_is_reused_once_every_holder_let_go(net):
    """The driver's pattern: an actor's result (creator) comes to its owner (p), which passes it
    on to another actor (x) beside a task. Once both let go it is pooled, and the next value is
    written into it."""
    net.lent_to_p()  # the creator keeps nothing of its own
    net.send("p:1", "x:1")
    assert list(net.streams[("p:1", C)]) == [(1, ("passed", key_of(net.procs["p:1"].kept[0]), 1, "x:1"))]
    net.deliver_all()
    net.check()
    assert net.creator.shared.stats().lent == 2  # to p, and to x through p
    net.procs["x:1"].let_go(0)
    net.deliver_all()
    assert net.in_use() == 1  # p still holds it
    net.procs["p:1"].let_go(0)
    net.deliver_all()
    assert net.in_use() == 0 and len(net.arena.recycled) == 1
    net.write()
    assert net.arena.stats()["reused"] == 1 and net.arena.stats()["created"] == 1


def test_a_release_that_beats_its_lease_notice_does_not_free_the_segment(net):
    """x gives back the lease p passed it before p's notice reaches the creator: x's count goes
    below zero, and p's own lease, whose release is behind its notice, keeps the segment busy."""
    net.lent_to_p()
    net.send("p:1", "x:1")  # notice queued to the creator, then the value to x
    net.deliver("p:1", "x:1", how="map")
    net.procs["p:1"].let_go(0)  # p's release queues behind its notice
    net.procs["x:1"].unmap(0)
    net.deliver("x:1", C)  # x's release first
    assert net.in_use() == 1 and not net.arena.recycled
    net.deliver("p:1", C)  # p's notice: x's count back to zero, p's lease still out
    assert net.in_use() == 1 and not net.arena.recycled
    net.deliver("p:1", C)  # p's release
    assert net.in_use() == 0 and len(net.arena.recycled) == 1


def test_a_holder_that_passed_it_on_keeps_it_busy_until_its_notice_is_counted(net):
    """x maps the segment; p let go and its release is on its way behind its notice. However the
    creator's streams interleave, the segment is not pooled until x let go."""
    net.lent_to_p()
    net.send("p:1", "x:1")
    net.deliver("p:1", "x:1", how="map")
    net.procs["p:1"].let_go(0)
    net.deliver_all()
    net.check()
    assert net.in_use() == 1
    net.procs["x:1"].unmap(0)
    net.deliver_all()
    assert len(net.arena.recycled) == 1


def test_a_late_release_of_an_earlier_use_leaves_the_next_use_alone(net):
    net.write()
    net.send(C, "x:1")
    net.deliver(C, "x:1")
    old = key_of(net.procs["x:1"].kept[0])
    net.creator.let_go(0)
    net.procs["x:1"].let_go(0)
    net.deliver_all()
    net.write()
    net.send(C, "x:1")
    net.deliver(C, "x:1")
    net.creator.let_go(0)
    net.creator.shared.on_release("x:1", old, 1)  # a duplicate, for the use that is over
    assert net.in_use() == 1
    net.check()


def test_a_passer_that_dies_with_its_notice_unsent_leaves_the_segment_closed_not_pooled(net):
    """p passes the segment to x and dies before its notice leaves: the creator never hears of
    x's lease. Once it hears p's stream ended, it closes the segment when let go instead of
    pooling it, and x keeps reading it (the kernel frees it with its last holder)."""
    net.lent_to_p()
    net.send("p:1", "x:1")
    net.deliver("p:1", "x:1", how="keep")
    net.die("p:1", kept_on_streams=0)
    net.creator.shared.holder_lost("p:1", dead=True)
    net.deliver_all()
    net.check()
    assert net.in_use() == 0 and not net.arena.recycled  # closed
    net.write()
    assert net.arena.stats()["created"] == 2
    net.check()  # x still reads its own bytes
    net.procs["x:1"].let_go(0)
    net.deliver_all()
    assert not net.arena.recycled


@pytest.mark.parametrize("heard", ["never", "later"])
@pytest.mark.parametrize("spoke_before", [False, True], ids=["first-batch-lost", "later-batch-lost"])
def test_a_notice_lost_on_a_stream_the_creator_did_not_see_end_leaves_the_segment_unpooled(net, heard, spoke_before):
    """The review's interleaving. p passes the segment on to x, which maps it; p's stream to the
    creator breaks with the notice on it, and the creator does not hear it (both dialled at once,
    a half-open connection) or hears it only later; p lets go, and its release goes on its new
    stream. Counted as it comes, x's count and p's are both zero: the creator would pool the
    segment under x's mapping. The release comes on another stream than the last one p's batches
    came on (or, when the lost notice was the first thing p ever sent, on a stream after its
    first), so before counting it the creator stops pooling what is in use."""
    if spoke_before:  # p's batches on its first stream were handled: the creator knows its serial
        net.write()
        net.send(C, "p:1")
        net.deliver(C, "p:1")
        net.creator.let_go(0)
        net.procs["p:1"].let_go(0)
        net.deliver_all()
        assert len(net.arena.recycled) == 1
    net.lent_to_p()
    net.send("p:1", "x:1")  # passed(x) queued on p's stream to the creator
    net.deliver("p:1", "x:1", how="map")
    net.break_stream("p:1", kept_on_stream=0, heard=heard)
    net.procs["p:1"].let_go(0)  # p's release: on its new stream
    net.deliver_all()
    net.check()
    assert net.in_use() == 0 and len(net.arena.recycled) == int(spoke_before)  # closed, not pooled
    if heard == "later":
        net.hear(0)
    net.write()  # into a segment of its own
    net.check()
    assert net.arena.stats()["reused"] == int(spoke_before)


def test_what_is_left_of_a_broken_stream_may_come_after_the_new_one(net):
    """p's old stream still delivers after its new one did (a half-open connection the creator has
    not given up on): p's release counts first, then the notice; x's mapping stays its own."""
    net.lent_to_p()
    net.send("p:1", "x:1")
    net.deliver("p:1", "x:1", how="map")
    net.break_stream("p:1", kept_on_stream=1, heard="never")  # the notice is still on its way
    net.procs["p:1"].let_go(0)
    net.deliver("p:1", C, serial=2)  # p's release, on the new stream, first: no count is above zero
    net.check()
    net.write()
    net.check()
    net.deliver("p:1", C, serial=1)  # the notice: late, for a use that is over
    net.procs["x:1"].unmap(0)
    net.deliver_all()
    net.check()
    assert not net.arena.recycled and net.arena.stats()["created"] == 2  # closed, never pooled


def test_a_descriptor_of_a_use_that_is_over_here_is_not_opened_by_its_creator(net):
    """x sends the creator back a value of its segment, through x's own fd, after the creator
    pooled the segment (it was told, wrongly, that x gave its lease back) and wrote the next use
    into it. The fd and inode are the same; the bytes are the next use's: the creator must not
    open it."""
    shared = net.write()
    net.send(C, "x:1")
    net.deliver(C, "x:1")
    net.creator.let_go(0)
    net.creator.shared.on_release("x:1", key_of(shared), 1)  # a stray release
    assert len(net.arena.recycled) == 1
    net.write()
    net.creator.let_go(0)
    net.send("x:1", C)  # x's own fd, the first use's generation
    net.deliver("x:1", C, how="keep")
    assert not net.creator.kept  # as if it never came (whoever asked for it asks again)


def test_holders_keep_reading_and_passing_on_after_the_creator_died(net):
    net.write()
    net.send(C, "p:1")
    net.deliver(C, "p:1")
    net.die(C, kept_on_streams=0)
    net.send("p:1", "x:1")
    net.deliver("p:1", "x:1")
    net.deliver_all()  # the notices to the dead creator go nowhere
    net.check()
    assert len(net.procs["x:1"].kept) == 1


ACTIONS = ["write", "result", "send", "send", "deliver", "deliver", "deliver", "let_go", "unmap"]
# Rare: each has every segment in use then closed, not pooled, which hides the rest. A stream that
# breaks unheard of (or heard of late) is all the creator sees of it in the serials.
FAILURES = {"failures": ["die", "break", "break_unheard", "hear"],
            "unheard-breaks": ["break_unheard", "break_unheard"]}


def _step(net: Net, data: st.DataObject, action: str) -> None:
    alive = [a for a, p in net.procs.items() if p.alive]
    holders = list(net.procs)[1:]
    if action in ("write", "result") and net.creator.alive:
        net.write()
        if action == "result":  # an actor's result, sent to its owner and not kept
            net.send(C, data.draw(st.sampled_from(holders), label="owner"), -1)
            net.creator.let_go(-1)
    elif action == "send":
        senders = [a for a in alive if net.procs[a].kept]
        if senders:
            src = data.draw(st.sampled_from(senders), label="from")
            dst = data.draw(st.sampled_from([a for a in net.procs if a != src]), label="to")
            net.send(src, dst, data.draw(st.integers(0, 9), label="which"))
    elif action == "deliver":
        pending = sorted({(*pair, serial) for pair, queue in net.streams.items() for serial, _ in queue})
        if pending:
            src, dst, serial = data.draw(st.sampled_from(pending), label="stream")
            net.deliver(src, dst, how=data.draw(st.sampled_from(["keep", "map", "drop"]), label="how"), serial=serial)
    elif action in ("let_go", "unmap"):
        have = [a for a in alive if (net.procs[a].kept if action == "let_go" else net.procs[a].maps)]
        if have:
            proc = net.procs[data.draw(st.sampled_from(have), label="who")]
            getattr(proc, action)(data.draw(st.integers(0, 9), label="which"))
    elif action == "die" and len(alive) > 1:
        dead = data.draw(st.sampled_from(alive), label="dies")
        net.die(dead, {a: data.draw(st.integers(0, 2), label="sent before") for a in net.procs})
        if dead != C and net.creator.alive and data.draw(st.booleans(), label="creator hears"):
            net.creator.shared.holder_lost(dead, dead=True)
    elif action in ("break", "break_unheard") and net.creator.alive:
        heard = "now" if action == "break" else data.draw(st.sampled_from(["later", "never"]), label="heard")
        net.break_stream(data.draw(st.sampled_from(holders), label="stream of"),
                         data.draw(st.integers(0, 3), label="sent before"), heard)
    elif action == "hear" and net.unheard:
        net.hear(data.draw(st.integers(0, 9), label="which"))


@pytest.mark.parametrize("failures", ["", "failures", "unheard-breaks"], ids=["no-failures", "failures",
                                                                            "unheard-breaks"])
@settings(max_examples=250, deadline=None, derandomize=True, database=None)
@given(data=st.data())
def test_any_interleaving_never_pools_a_segment_under_a_holder_and_pools_it_once_all_let_go(failures, data):
    """Random interleavings of writes, lends, passes, deliveries in any order across streams, and
    holders letting go; with failures, processes dying and streams ending with messages queued on
    them, the creator hearing of it at once, later or never, and what is left on a broken stream
    arriving before or after what goes on the new one (a passer dying with its notice unsent while
    its receiver holds the segment comes up rarely here: it has a test of its own above)."""
    net = Net(HOLDERS[:2])  # fewer processes: each path of a few steps comes up more often
    try:
        for _ in range(data.draw(st.integers(1, 80), label="steps")):
            rare = FAILURES.get(failures, [])
            roll = data.draw(st.integers(0, (2 if failures == "unheard-breaks" else 5) * len(ACTIONS) - 1),
                             label="action")
            _step(net, data, rare[roll] if roll < len(rare) else ACTIONS[roll % len(ACTIONS)])
            net.check()
        net.deliver_all()
        net.check()
        if failures:
            return
        for proc in net.procs.values():
            while proc.kept:
                proc.let_go(0)
            proc.maps.clear()
        net.deliver_all()
        assert net.in_use() == 0 and net.creator.shared.stats().lent == 0
        assert len(net.arena.recycled) == net.writes  # every use pooled again, none closed
    finally:
        for proc in net.procs.values():
            proc.maps.clear()
            proc.shared.close()
