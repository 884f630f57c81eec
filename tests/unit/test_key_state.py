"""Keyed state moved between instances (savepoints at other parallelism): what instances do after
taking over keys equals what one instance would have done with all of them (no actors)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from actorrt.streaming.key_state import KeySlice, give_keys, take_keys
from actorrt.streaming.keys import partition
from actorrt.streaming.logic import StageLogic
from actorrt.streaming.plan import EventTime, Input, Port, Stage, Step, Tumbling, to_us
from actorrt.streaming.process import KeyedProcess


class Alarm(KeyedProcess):
    """Counts a key's records; a timer 3 s after each emits the count (what a timer holds moves too)."""

    def on_record(self, ctx, record):
        ctx.state = (ctx.state or 0) + 1
        ctx.timer(ctx.time + 3.0)
        return []

    def on_timer(self, ctx, at):
        yield ctx.key, at, ctx.state


def _logics(kind: str, n: int) -> list[StageLogic]:
    put = Input(0, 0, key=lambda r: r[0])
    if kind == "window":
        step = Step("window", "sum", lambda acc, r: acc + r[2], init=lambda: 0, window=Tumbling(2.0))
    else:
        step = Step("process", "alarm", Alarm())
    return [StageLogic(Stage(1, [put], [step], [Port(0)]), EventTime(lambda r: r[1]), [put]) for _ in range(n)]


def _run(logics, batches, mark_of):
    out = []
    for batch in batches:
        parts = [[r for r in batch if partition(r[0], len(logics)) == i] for i in range(len(logics))]
        for logic, part in zip(logics, parts, strict=True):  # every instance hears the watermark
            times = [to_us(r[1]) for r in part]
            out += logic.process(part, 0.0, 0, times, mark_of(batch))[0].records
    return out


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.sampled_from(["window", "process"]), st.integers(1, 3), st.integers(1, 3), st.integers(0, 2**32))
def test_instances_that_took_over_keys_emit_what_one_instance_would(kind, before, after, seed):
    rng = random.Random(seed)
    records = [(f"k{rng.randrange(6)}", i * 0.25, rng.randrange(10)) for i in range(120)]
    batches = [records[i:i + 8] for i in range(0, len(records), 8)]
    cut = rng.randrange(1, len(batches))

    def mark_of(batch):
        return to_us(batch[-1][1])

    whole = _run(_logics(kind, 1), batches, mark_of)
    first = _logics(kind, before)
    emitted = _run(first, batches[:cut], mark_of)
    saved = KeySlice()
    for logic in first:
        saved.merge(take_keys(logic, lambda key: True))
        assert not logic.state.values and not logic.windows  # taken out
    second = _logics(kind, after)
    for logic, part in zip(second, saved.split(lambda key: partition(key, after), after), strict=True):
        give_keys(logic, part)
        logic.progress.mark = mark_of(batches[cut - 1])
    emitted += _run(second, batches[cut:], mark_of)
    assert sorted(emitted, key=repr) == sorted(whole, key=repr)


def test_a_slice_in_pieces_keeps_each_keys_state_together_and_loses_nothing():
    whole = KeySlice(values={f"k{i}": i for i in range(25)}, timers={"k3": {5}, "z": {7}},
                     windows={(0, f"k{i}"): i for i in range(0, 25, 2)}, fold_times={"k24": 9})
    pieces = whole.chunks(10)
    assert len(pieces) == 3  # 26 keys (z has only a timer), 10 a piece
    merged = KeySlice()
    for piece in pieces:
        keys = set(piece.values) | set(piece.timers) | {k for _, k in piece.windows} | set(piece.fold_times)
        assert 0 < len(keys) <= 10
        for _, key in piece.windows:
            assert key in piece.values  # a key's windows go with its value
        merged.merge(piece)
    assert merged == whole
    assert whole.chunks(10) == pieces  # the same pieces every time (a replay sends the same)
