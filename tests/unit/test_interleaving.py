"""A concurrent actor's steps (``core/interleaving.py``), without processes: a replay with other
timings goes through the recorded steps in the recorded order and leaves the same state; a step
past a gap in the records runs live; a replay that takes fewer steps than it recorded is caught."""

from __future__ import annotations

import asyncio
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actorrt.core import context
from actorrt.core.interleaving import Interleaving, drive, left_over, recorded_steps
from actorrt.exceptions import ReplayDivergedError
from actorrt.lineage.application_log import RunningTask
from actorrt.rpc import common_pb2 as pb


async def _run_calls(steps: Interleaving, specs: list[pb.TaskSpec], delays: dict[bytes, list[float]],
                     recorded: dict[bytes, pb.TaskSpec], state: list) -> list[RunningTask]:
    """Each spec as a call that appends to ``state`` around awaits of its ``delays``."""

    def on_record(spec: pb.TaskSpec) -> None:
        recorded[spec.task_id] = spec

    async def call(spec: pb.TaskSpec) -> RunningTask:
        task = RunningTask(spec, replayed=bool(spec.application_log))
        context.running_task.set(task)

        async def body() -> None:
            for k, delay in enumerate(delays[spec.task_id]):
                state.append((spec.task_id, k, len(state)))  # what it appends depends on the others' steps
                await asyncio.sleep(delay)
            state.append((spec.task_id, "end", len(state)))

        await steps.turn(on_record)
        await drive(body(), lambda: steps.turn(on_record))
        return task

    return list(await asyncio.gather(*(call(s) for s in specs)))


def _specs(n: int) -> list[pb.TaskSpec]:
    return [pb.TaskSpec(task_id=bytes([i]) * 16, method=f"call{i}") for i in range(n)]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), calls=st.integers(2, 5))
def test_a_replay_with_other_timings_takes_the_recorded_steps_and_leaves_the_same_state(seed, calls):
    rng = random.Random(seed)
    specs = _specs(calls)
    delays = {s.task_id: [rng.choice([0, 0.0005, 0.001, 0.002]) for _ in range(rng.randint(0, 4))] for s in specs}
    recorded: dict[bytes, pb.TaskSpec] = {}
    live: list = []
    asyncio.run(_run_calls(Interleaving(), specs, delays, recorded, live))
    replay_order = [recorded[s.task_id] for s in specs]
    assert sorted(n for s in replay_order for n in recorded_steps(s)) == list(range(len(live)))  # one per step

    other = {t: list(reversed(d)) for t, d in delays.items()}  # other timings: the log decides
    replayed: list = []
    steps = Interleaving()
    steps.replaying(replay_order)
    tasks = asyncio.run(_run_calls(steps, replay_order, other, {}, replayed))
    assert replayed == live
    assert all(left_over(t) == 0 for t in tasks)


def test_steps_past_a_gap_in_the_records_run_live_after_the_recorded_ones():
    specs = _specs(2)
    delays = {specs[0].task_id: [0.001, 0.001], specs[1].task_id: [0.0015, 0.0015]}
    recorded: dict[bytes, pb.TaskSpec] = {}
    asyncio.run(_run_calls(Interleaving(), specs, delays, recorded, []))
    first, second = recorded[specs[0].task_id], recorded[specs[1].task_id]
    cut = pb.TaskSpec()
    cut.CopyFrom(second)
    del cut.application_log[1:]  # its later versions never reached the store
    steps = Interleaving()
    steps.replaying([first, cut])
    gap = recorded_steps(second)[1]
    state: list = []
    asyncio.run(_run_calls(steps, [first, cut], delays, {}, state))
    assert steps.next == 6 and len(state) == 6
    assert [e[:2] for e in state[:gap]] == [e[:2] for e in _live_order(first, second)[:gap]]  # the prefix as recorded


def _live_order(*specs: pb.TaskSpec) -> list[tuple]:
    by_step = {n: (s.task_id, k) for s in specs for k, n in enumerate(recorded_steps(s))}
    return [by_step[n] for n in sorted(by_step)]


def test_a_replay_that_takes_fewer_steps_than_it_recorded_is_caught_and_ends_the_calls_waiting():
    specs = _specs(2)
    delays = {specs[0].task_id: [0.001, 0.001], specs[1].task_id: [0.0015]}
    recorded: dict[bytes, pb.TaskSpec] = {}
    asyncio.run(_run_calls(Interleaving(), specs, delays, recorded, []))
    order = [recorded[s.task_id] for s in specs]
    steps = Interleaving()
    steps.replaying(order)
    fewer = {specs[0].task_id: [], specs[1].task_id: [0.0015]}  # an unrecorded read made it skip its awaits

    async def replay() -> None:
        first = asyncio.ensure_future(_run_calls(steps, order[:1], fewer, {}, []))
        second = asyncio.ensure_future(_run_calls(steps, order[1:], fewer, {}, []))
        [task] = await first
        assert left_over(task) == 2  # it ended with steps of its record left
        await asyncio.sleep(0.05)
        assert not second.done()  # the other waits for a step that will not come
        steps.fail(ReplayDivergedError("diverged"))
        with pytest.raises(ReplayDivergedError):
            await second

    asyncio.run(replay())
