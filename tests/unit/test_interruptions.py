"""Where a kill interrupted a method, as its log records it, and the replay's cancel at the same
point (actorrt/core/interruptions.py), without processes."""

from __future__ import annotations

import asyncio

import pytest

from actorrt.core import interruptions
from actorrt.lineage.application_log import RunningTask
from actorrt.rpc import common_pb2 as pb
from actorrt.util import pickling


def test_the_log_records_how_many_tasks_the_method_had_sent():
    versions: list[pb.TaskSpec] = []
    task = RunningTask(pb.TaskSpec(task_id=b"t", application_log=[pickling.dumps(0.5)]))
    task.position = 1
    task.sent = 3
    runner = asyncio.new_event_loop().create_future()  # anything with cancel()
    interruptions.interrupt(task, runner, versions.append)
    assert task.interrupted and runner.cancelled()
    assert interruptions.recorded_interruption(versions[-1]) == 3
    assert interruptions.recorded_interruption(pb.TaskSpec(application_log=[pickling.dumps(0.5)])) is None


@pytest.mark.parametrize("after", [1, 3])
def test_a_replay_is_cancelled_at_its_first_await_after_as_many_sends(after):
    task = RunningTask(pb.TaskSpec(task_id=b"t"), replayed=True)
    task.interrupt_after = after
    done_before: list[int] = []

    async def method():
        for i in range(10):
            interruptions.sent_one(task)  # a send, then code up to the next await, which raises
            done_before.append(i)
            await asyncio.sleep(0)

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(method())
    assert done_before == list(range(after)) and task.sent == after and task.interrupted
