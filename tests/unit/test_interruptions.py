"""Where a kill interrupted a method, as its log records it, and the replay's cancel at the same
point (actorrt/core/interruptions.py), without processes."""

from __future__ import annotations

import asyncio

import pytest

from actorrt.core import interruptions
from actorrt.lineage.application_log import RunningTask
from actorrt.rpc import common_pb2 as pb
from actorrt.util import pickling


def test_the_log_records_how_many_tasks_the_method_had_sent_and_record_reads_past_it():
    versions: list[pb.TaskSpec] = []
    task = RunningTask(pb.TaskSpec(task_id=b"t", application_log=[pickling.dumps(0.5)]))
    task.position = 1
    task.sent = 3
    runner = asyncio.new_event_loop().create_future()  # anything with cancel()
    interruptions.interrupt(task, runner, versions.append)
    assert task.interrupted and runner.cancelled()
    logged = versions[-1]
    assert interruptions.recorded_interruption(logged) == 3
    assert interruptions.recorded_interruption(pb.TaskSpec(application_log=[pickling.dumps(0.5)])) is None
    # A replay's events are read in order, the mark skipped: code after the interruption (its
    # cleanup) records afresh, not the mark as its value.
    logged.application_log.append(pickling.dumps("cleanup"))
    replay = RunningTask(logged, replayed=True)
    assert replay.record(lambda: 0.9, versions.append) == 0.5
    assert replay.record(lambda: "other", versions.append) == "cleanup"


def _replay(after: int, method) -> tuple[RunningTask, BaseException]:
    """Run ``method(task)`` as the actor replays a method interrupted after ``after`` sends."""
    task = RunningTask(pb.TaskSpec(task_id=b"t"), replayed=True)

    async def main() -> BaseException:
        inner = asyncio.ensure_future(method(task))
        task.interrupt_after, task.cancel = after, inner.cancel
        try:
            await inner
        except BaseException as exc:  # noqa: BLE001 - what the method ended with
            return exc
        raise AssertionError("the replay ran to its end")

    return task, asyncio.run(main())


def _send(task: RunningTask) -> None:
    interruptions.may_send(task)  # as the submitter does, then sends
    interruptions.sent_one(task)


@pytest.mark.parametrize("after", [1, 3])
def test_a_replay_is_cancelled_at_its_first_await_after_as_many_sends(after):
    done_before: list[int] = []

    async def method(task):
        for i in range(10):
            _send(task)  # a send, then code up to the next await, which raises
            done_before.append(i)
            await asyncio.sleep(0)

    task, ended = _replay(after, method)
    assert isinstance(ended, asyncio.CancelledError)
    assert done_before == list(range(after)) and task.sent == after and task.interrupted


def test_a_replay_whose_await_does_not_wait_sends_no_more_than_the_first_run():
    ready = None

    async def method(task):
        nonlocal ready
        ready = asyncio.get_running_loop().create_future()
        ready.set_result(1)  # an await that waited in the first run, and not now
        for _ in range(5):
            _send(task)
            await ready

    task, ended = _replay(1, method)
    assert isinstance(ended, asyncio.CancelledError) and task.sent == 1
