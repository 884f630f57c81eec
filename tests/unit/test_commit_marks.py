"""Commit marks: a receiver announces a channel's prefix only where every task ran and is committed."""

from __future__ import annotations

import asyncio

from actorrt.lineage.commit_marks import CommitMarks
from actorrt.lineage.options import FaultToleranceMode, FaultToleranceOptions
from actorrt.lineage.strategies import LineageStash
from actorrt.rpc import common_pb2 as pb

CH = (b"r", b"s")


def test_the_mark_moves_over_the_prefix_that_ran_and_is_committed_at_its_final_version():
    committed: dict[bytes, int] = {}
    marks = CommitMarks(lambda task_id: committed.get(task_id, -1))
    for counter, version in ((1, 0), (2, 1), (3, 0)):
        marks.ran(CH, counter, b"t%d" % counter, version)
    assert marks.advance() == []
    committed.update({b"t1": 0, b"t2": 0, b"t3": 0})  # t2 ran as version 1: version 0 is not enough
    assert marks.advance() == [(b"r", b"s", 1)]
    committed[b"t2"] = 1
    assert marks.advance() == [(b"r", b"s", 3)]
    assert marks.advance() == []  # nothing new
    assert marks.covers(CH, 3) and not marks.covers(CH, 4)


def test_a_replayed_task_counts_as_committed():
    marks = CommitMarks(lambda task_id: -1)
    marks.ran(CH, 7, b"t7", -1)
    assert marks.advance() == [(b"r", b"s", 7)]


class _Store:
    bytes_written = 0


def test_a_receiver_announces_a_mark_instead_of_telling_the_submitter_of_each_task():
    async def run() -> tuple[list, list]:
        ft = LineageStash(FaultToleranceOptions(mode=FaultToleranceMode.LINEAGE_STASH), _Store())
        told: list = []
        announced: list = []

        def announce(marks: list) -> set[str]:
            announced.extend(marks)
            return {"submitter"}  # a node process; a driver submitter is not told by marks

        ft._notify, ft._announce = lambda peer, acks: told.append((peer, acks)), announce
        ran = pb.TaskSpec(task_id=b"t1", receiver=b"r", sender=b"s", task_counter=1)
        waiting = pb.TaskSpec(task_id=b"t2", receiver=b"r", sender=b"s", task_counter=2)
        ft.on_receive(ran, "submitter")
        ft.on_receive(waiting, "submitter")
        ft.on_receive(pb.TaskSpec(task_id=b"t1", receiver=b"r", sender=b"s", task_counter=1), "driver")
        ft.on_executed(ran, replayed=False)  # t2 waits in the mailbox: its version may still change
        ft._on_acks([(b"t1", 0), (b"t2", 0)])
        return told, announced

    told, announced = asyncio.run(run())
    assert announced == [(b"r", b"s", 1)]
    # The mark covers t1 for the node process; t2 is told on its own, and so is the driver.
    assert sorted(told) == [("driver", [(b"t1", 0)]), ("submitter", [(b"t2", 0)])]


def _strategy() -> tuple[LineageStash, list, list]:
    ft = LineageStash(FaultToleranceOptions(mode=FaultToleranceMode.LINEAGE_STASH), _Store())
    told: list = []
    announced: list = []

    def announce(marks: list) -> set[str]:
        announced.extend(marks)
        return {"submitter"}

    ft._notify, ft._announce = lambda peer, acks: told.append((peer, acks)), announce
    return ft, told, announced


def test_a_replayed_task_that_recorded_afresh_is_marked_only_once_that_version_is_committed():
    async def run() -> tuple[list, list]:
        ft, _, announced = _strategy()
        # The replay ran t1 as the store had it (version 0), its log ran out, and it recorded a
        # value: version 1, stashed and queued for the store, on which its children may depend.
        ft.on_record(pb.TaskSpec(task_id=b"t1", receiver=b"r", sender=b"s", task_counter=1, version=1))
        ft.on_executed(pb.TaskSpec(task_id=b"t1", receiver=b"r", sender=b"s", task_counter=1), replayed=True)
        ft._look_at_marks()
        before = list(announced)
        ft._on_acks([(b"t1", 1)])
        return before, announced

    before, after = asyncio.run(run())
    assert before == [] and after == [(b"r", b"s", 1)]


def test_a_re_sent_task_a_mark_covers_is_answered_committed_at_once():
    async def run() -> list:
        ft, told, _ = _strategy()
        ft.on_committed_upto([(b"r", b"s", 5)])  # (after a restart: the replay's mark)
        ft.on_receive(pb.TaskSpec(task_id=b"t3", receiver=b"r", sender=b"s", task_counter=3), "driver")
        assert not ft._to_tell  # nothing waits for an ack that no write will bring
        return told

    assert asyncio.run(run()) == [("driver", [(b"t3", 0)])]
