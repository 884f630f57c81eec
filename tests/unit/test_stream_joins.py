"""Flows with several inputs, in one process (``tests/support/local_flow.py``), their messages
delivered in seeded random orders, against plain-Python oracles: unions of sources with their own
watermarks, window joins, interval joins, connected process functions with timers, side outputs,
and state that a time-to-live or a join's bounds keep small. The same flows on a cluster, with a
node killed, are in tests/integration/test_streaming_joins.py."""

from __future__ import annotations

import collections
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actorrt.streaming import Dataflow, EventTime, Fed, KeyedProcess, Sliding, Tumbling
from actorrt.streaming.logic import RecordError
from actorrt.streaming.state import KeyedState
from tests.support.flows import property_settings
from tests.support.local_flow import LocalFlow

Record = tuple[str, int, float, int]  # (side, key, event time s, id)


def _records(side: str, seed: int, n: int, keys: int, disorder: float, spacing: float = 0.1) -> list[Record]:
    """Times rising by ``spacing`` per record, each up to ``disorder`` s early (within max_delay)."""
    rng = random.Random(seed)
    return [(side, rng.randrange(keys), round(max(0.0, i * spacing - rng.uniform(0, disorder)), 3), i)
            for i in range(n)]


def _time(record: Record) -> float:
    return record[2]


def _key(record: Record) -> int:
    return record[1]


def _ids(pairs) -> list[tuple[int, int, int]]:
    return sorted((key, left[3], right[3]) for key, left, right in pairs)


def _two_sources(name: str, disorder: float, parallelism: tuple[int, int] = (2, 1), batch: int = 7):
    flow = Dataflow(name, batch_size=batch)
    time = EventTime(_time, max_delay_s=disorder)
    left = flow.source(Fed(), parallelism=parallelism[0], time=time, name="left")
    right = flow.source(Fed(), parallelism=parallelism[1], time=time, name="right")
    return flow, left, right


def _run(flow: Dataflow, seed: int, lefts: list[Record], rights: list[Record]):
    local = LocalFlow(flow.plan, seed)
    left, right = flow.plan.sources
    local.feed(lefts, source=left)
    local.feed(rights, source=right)
    return local, local.finish()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_union_of_two_sources_counts_each_window_once_whichever_watermark_lags(seed):
    lefts, rights = _records("L", seed, 400, 3, 1.0), _records("R", seed + 50, 300, 3, 1.0, spacing=0.13)
    flow, left, right = _two_sources("union", 1.0)
    (left.union(right).key_by(_key)
     .window(Tumbling(2.0), int, lambda n, record: n + 1, parallelism=2).collect())
    _, result = _run(flow, seed, lefts, rights)
    oracle = collections.Counter((r[1], r[2] - r[2] % 2.0) for r in lefts + rights)
    assert {(key, start): n for key, start, _, n in result.outputs} == dict(oracle)
    assert len(result.outputs) == len(oracle)
    assert result.late == []


@pytest.mark.parametrize(("window", "seed"), [(Tumbling(1.5), 4), (Sliding(2.0, 1.0), 5)])
def test_a_window_join_emits_each_pair_of_a_window_once_and_keeps_no_closed_window(window, seed):
    lefts, rights = _records("L", seed, 300, 4, 0.8), _records("R", seed + 9, 250, 4, 0.8, spacing=0.12)
    flow, left, right = _two_sources("wjoin", 0.8)
    left.key_by(_key).connect(right.key_by(_key)).window_join(window, parallelism=2).collect()
    local, result = _run(flow, seed, lefts, rights)
    oracle = collections.Counter()
    for lt in lefts:
        for rt in rights:
            if lt[1] == rt[1]:
                shared = set(window.starts(round(lt[2] * 1e6))) & set(window.starts(round(rt[2] * 1e6)))
                oracle[(lt[1], lt[3], rt[3])] += len(shared)
    assert collections.Counter(_ids(result.outputs)) == +oracle
    assert all(not logic.windows for instances in local.logic for logic in instances)


@given(seed=st.integers(0, 10**6), before=st.sampled_from([0.0, 0.3, 1.0]), after=st.sampled_from([0.0, 0.5, 2.0]),
       disorder=st.sampled_from([0.0, 0.4, 1.5]), parallelism=st.sampled_from([(1, 1), (2, 1), (2, 3)]))
@property_settings(ci_examples=60)
def test_an_interval_join_in_any_delivery_order_emits_exactly_the_pairs_in_the_interval(
        seed, before, after, disorder, parallelism):
    lefts, rights = _records("L", seed, 150, 3, disorder), _records("R", seed + 1, 150, 3, disorder, spacing=0.11)
    flow, left, right = _two_sources("ijoin", disorder, parallelism)
    left.key_by(_key).connect(right.key_by(_key)).interval_join(before, after, parallelism=2).collect()
    _, result = _run(flow, seed, lefts, rights)
    us = lambda seconds: round(seconds * 1e6)  # noqa: E731 - times as the operators hold them
    oracle = sorted((lt[1], lt[3], rt[3]) for lt in lefts for rt in rights
                    if lt[1] == rt[1] and us(lt[2]) - us(before) <= us(rt[2]) <= us(lt[2]) + us(after))
    assert result.late == []
    assert _ids(result.outputs) == oracle


def test_an_interval_join_keeps_only_what_records_to_come_can_match():
    lefts, rights = _records("L", 8, 2000, 5, 0.5), _records("R", 9, 2000, 5, 0.5)
    flow, left, right = _two_sources("bounded", 0.5, (1, 1))
    left.key_by(_key).connect(right.key_by(_key)).interval_join(0.2, 0.3).collect()
    local = LocalFlow(flow.plan, 8)
    kept = []
    for i in range(0, 2000, 100):  # both inputs move on together, as a live flow's would
        local.feed(lefts[i:i + 100], source=0)
        local.feed(rights[i:i + 100], source=1)
        local.deliver()
        kept.append(len(local.logic[2][0].joined))
    # 10 records a second per side; a record stays as long as the interval, the disorder and a
    # batch's spread of times (7 records: 0.7 s) hold it: a few seconds, not all 4,000 records.
    assert max(kept) < 120
    assert len(local.finish().outputs) > 0


class _BidsWhileOpen(KeyedProcess):
    """Per auction (left: (side, key, opened at, id, closes at)), the bids (right) at times in
    [opened, closes), emitted when the auction closes; bids for no open auction are kept only
    for the state's time-to-live."""

    def init(self):
        return None, []

    def on_left(self, ctx, auction):
        ctx.state = (auction, ctx.state[1])
        ctx.timer(auction[4])

    def on_right(self, ctx, bid):
        auction, bids = ctx.state
        ctx.state = (auction, bids + [bid[2]])

    def on_timer(self, ctx, t):
        auction, bids = ctx.state
        if auction is not None and auction[4] == t:
            yield auction[3], sum(1 for b in bids if auction[2] <= b < auction[4])
            ctx.clear()


@pytest.mark.parametrize("seed", [11, 12])
def test_a_connected_process_function_fires_its_timers_at_the_watermark_and_its_ttl_drops_strays(seed):
    rng = random.Random(seed)
    auctions = [("L", k, round(k * 0.5, 3), k, round(k * 0.5 + rng.uniform(0.5, 3.0), 3)) for k in range(60)]
    times = [r[2] for r in _records("R", seed, 750, 1, 0.5, spacing=0.04)]  # 30 s, as the auctions
    # Half the bids are for auctions that never open: strays, which only the ttl takes away.
    bids = [("R", rng.randrange(60) if rng.random() < 0.5 else rng.randrange(100, 5000), t, i)
            for i, t in enumerate(times)]
    flow, left, right = _two_sources("process", 0.5, (1, 2))
    (left.key_by(_key).connect(right.key_by(_key))
     .process(_BidsWhileOpen(), parallelism=2, ttl_s=4.0).collect())
    local = LocalFlow(flow.plan, seed)
    local.feed(auctions, source=0)
    local.feed(bids, source=1)
    local.deliver()
    held = sum(len(logic.state) for logic in local.logic[2])
    result = local.finish()
    oracle = {a[3]: sum(1 for b in bids if b[1] == a[3] and a[2] <= b[2] < a[4]) for a in auctions}
    assert dict(result.outputs) == oracle
    assert len(result.outputs) == len(oracle)
    strays = len({b[1] for b in bids if b[1] >= 100})
    assert strays > 250 and held < strays / 2  # before the end: what was written within the ttl
    assert all(not logic.state.timers for logic in local.logic[2])  # every auction's timer fired


def test_side_outputs_split_a_stream_and_a_union_brings_them_back():
    records = list(range(100))
    flow = Dataflow("route", batch_size=9)
    routed = flow.source(Fed(), parallelism=2).route(
        lambda n: [("even" if n % 2 == 0 else "odd", n)] + ([("big", n)] if n >= 90 else []), ["even", "odd", "big"])
    routed["even"].map(lambda n: n * 10).collect("even")
    routed["big"].collect("big")
    routed["even"].union(routed["odd"]).key_by(lambda n: n % 3).fold(int, lambda a, n: a + n, emit="final",
                                                                   parallelism=2).collect()
    local = LocalFlow(flow.plan, 1)
    local.feed(records)
    result = local.finish()
    assert sorted(result.collected["even"]) == [n * 10 for n in records if n % 2 == 0]
    assert sorted(result.collected["big"]) == list(range(90, 100))
    assert sorted(result.outputs) == [(k, sum(n for n in records if n % 3 == k)) for k in range(3)]


def test_a_route_to_an_output_it_does_not_name_fails_the_record_or_puts_it_aside():
    flow = Dataflow("bad-route")
    flow.source(Fed()).route(lambda n: [("nowhere", n)], ["somewhere"])["somewhere"].collect()
    local = LocalFlow(flow.plan, 1)
    local.feed([1])
    with pytest.raises(RecordError, match="nowhere"):
        local.deliver()
    flow = Dataflow("bad-route-aside")
    flow.source(Fed()).route(lambda n: [("nowhere", n)] if n == 2 else [("somewhere", n)], ["somewhere"],
                             on_error="dead_letter")["somewhere"].collect()
    local = LocalFlow(flow.plan, 1)
    local.feed([1, 2, 3])
    result = local.finish()
    assert sorted(result.outputs) == [1, 3]
    assert [d.record for d in result.dead_letters] == [2]


def test_a_branch_taken_twice_runs_each_branch_on_the_same_records():
    flow = Dataflow("branches", batch_size=4)
    numbers = flow.source(Fed()).map(lambda n: n + 1)
    numbers.filter(lambda n: n % 2 == 0).collect("even")
    numbers.map(lambda n: -n).collect("negated")
    numbers.key_by(lambda n: 0).fold(int, lambda a, n: a + n, emit="final").collect()
    local = LocalFlow(flow.plan, 3)
    local.feed(list(range(10)))
    result = local.finish()
    assert sorted(result.collected["even"]) == [2, 4, 6, 8, 10]
    assert sorted(result.collected["negated"]) == [-n for n in range(10, 0, -1)]
    assert result.outputs == [(0, 55)]
    assert len(flow.plan.stages) == 2  # the stateless branches ran where the records were


def test_keyed_state_expires_what_was_not_written_within_its_ttl_and_timers_fire_in_time_order():
    state = KeyedState(ttl_us=10)
    state.put("a", 1, 0)
    state.put("b", 1, 5)
    state.put("a", 2, 8)  # written again: lives to 18
    assert state.expire(14) == []
    assert state.expire(15) == ["b"]
    assert "a" in state and "b" not in state
    assert state.expire(18) == ["a"]
    state.set_timer("x", 30)
    state.set_timer("y", 20)
    state.set_timer("x", 30)  # the same timer
    state.set_timer("z", 25)
    state.clear("z")
    assert state.next_due(29) == (20, "y")
    assert state.next_due(29) is None
    assert state.next_due(100) == (30, "x")
    assert state.next_due(100) is None


def test_bad_joins_and_sources_are_refused_where_they_are_built():
    flow = Dataflow("refused")
    plain = flow.source(Fed())
    with pytest.raises(ValueError, match="event time"):
        plain.key_by(_key).connect(plain.key_by(_key)).interval_join(1, 1)
    with pytest.raises(ValueError, match="every source"):
        flow.source(Fed(), time=EventTime(_time))
    with pytest.raises(ValueError, match="named"):
        flow.source(Fed(), name="source0")
    with pytest.raises(TypeError, match="KeyedProcess"):
        plain.key_by(_key).process(lambda ctx, r: r)
    with pytest.raises(ValueError, match="same dataflow"):
        plain.union(Dataflow("other").source(Fed()))
    timed = Dataflow("timed")
    a = timed.source(Fed(), time=EventTime(_time), name="a")
    with pytest.raises(ValueError, match="empty interval"):
        a.key_by(_key).connect(a.key_by(_key)).interval_join(-2, 1)


def _timed(name: str):
    flow = Dataflow(name, batch_size=2)
    return flow, flow.source(Fed(), time=EventTime(lambda r: r[1]))


def test_a_final_fold_with_a_ttl_still_emits_its_keys_at_the_end():
    flow, records = _timed("final-ttl")
    records.key_by(lambda r: r[0]).fold(int, lambda n, r: n + r[2], emit="final", ttl_s=100.0).collect()
    local = LocalFlow(flow.plan, 1)
    local.feed([("a", 1.0, 1), ("b", 2.0, 1), ("a", 3.0, 1)])
    assert sorted(local.finish().outputs) == [("a", 2), ("b", 1)]


class _SumUntil(KeyedProcess):
    """Per key: values summed until a timer at the record's time plus one second emits them."""

    def init(self):
        return 0

    def on_record(self, ctx, record):
        ctx.state = ctx.state + record[2]
        ctx.timer(record[1] + 1.0)

    def on_timer(self, ctx, t):
        yield ctx.key, t, ctx.state
        ctx.clear()


def test_an_event_time_timer_fires_only_once_the_watermark_passes_it():
    flow, records = _timed("timer-at")
    records.key_by(lambda r: r[0]).process(_SumUntil()).collect()
    local = LocalFlow(flow.plan, 1)
    local.feed([("a", 1.0, 1), ("b", 2.0, 0)])  # the watermark is at 2.0: a record at 2.0 may still come
    local.deliver()
    assert local.result.outputs == []
    local.feed([("a", 1.0, 10), ("c", 2.5, 0)])  # ...and it does (not late), before the timer fires
    assert local.finish().outputs[:1] == [("a", 2.0, 11)]


class _Chain(KeyedProcess):
    """Each key sets two timers; key "a"'s timers each set another a second later (up to 5 s), and
    key "c"'s first clears the key, so its second never fires."""

    def on_record(self, ctx, record):
        ctx.timer(record[1])
        ctx.timer(record[1] + 0.5)

    def on_timer(self, ctx, t):
        yield ctx.key, t
        if ctx.key == "c":
            ctx.clear()  # its second timer does not fire
        elif t + 1 <= 5 and ctx.key == "a":
            ctx.timer(t + 1)  # due already at the end: fires in the same sweep


def test_timers_set_by_a_timer_fire_in_the_same_sweep_and_cleared_ones_never_do():
    flow, records = _timed("chain")
    records.key_by(lambda r: r[0]).process(_Chain()).collect()
    local = LocalFlow(flow.plan, 1)
    local.feed([("a", 1.0, 0), ("c", 1.0, 0)])
    fired = local.finish().outputs
    assert [t for key, t in fired if key == "c"] == [1.0]
    assert sorted(t for key, t in fired if key == "a") == [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0]


def test_a_branch_nobody_takes_does_not_run():
    flow = Dataflow("unused")
    numbers = flow.source(Fed())
    numbers.map(lambda n: 1 / n)  # built, never consumed: it would fail on 0
    numbers.map(lambda n: n + 1).collect()
    local = LocalFlow(flow.plan, 1)
    local.feed([0, 1])
    assert sorted(local.finish().outputs) == [1, 2]


def test_sources_a_flow_cannot_run_are_refused_and_a_union_with_itself_gives_each_record_twice():
    flow = Dataflow("mixed")
    flow.source([1, 2])
    with pytest.raises(ValueError, match="all Fed"):
        flow.source(Fed())
    named = Dataflow("names")
    named.source(Fed(), name="source1")
    named.source(Fed())  # the name it takes is not the one given before
    assert sorted(named.plan.stages[s].source_name for s in named.plan.sources) == ["source0", "source1"]
    twice = Dataflow("twice")
    numbers = twice.source(Fed())
    numbers.collect("once")
    with pytest.raises(ValueError, match="collected as 'once'"):
        numbers.map(abs).union(numbers).collect("other")
    assert "other" not in [p.collect for p in twice.plan.stages[0].ports]  # nothing half done
    numbers.union(numbers).key_by(lambda n: 0).fold(int, lambda a, n: a + n, emit="final").collect("sum")
    local = LocalFlow(twice.plan, 1)
    local.feed([1, 2, 3])
    assert local.finish().collected["sum"] == [(0, 12)]
