"""Record lineage, captured by the operators' own logic and queried from a real redis-server,
against a plain-Python provenance oracle: the same flow run with every record tagged with the
source rows it came from (a fold, a window, a join's pair and a process function's state take
the union of their records' tags).

Flows run in one process (``tests/support/local_flow.py``), their messages delivered in seeded
random orders, so hypothesis draws many shapes and schedules; the same capture on a real cluster,
through kills, is in test_record_lineage.py."""

from __future__ import annotations

import asyncio
import random
import uuid
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actorrt.lineage import queries
from actorrt.lineage.records import RecordId, SourceRecord
from actorrt.store.clients import ShardedStore
from actorrt.store.redis_server import RedisShard
from actorrt.store.relations import RelationQueue, RelationReader, save_flow
from actorrt.streaming import Dataflow, EventTime, Fed, KeyedProcess, Tumbling
from actorrt.streaming.provenance import flow_shape
from tests.support.flows import property_settings
from tests.support.local_flow import LocalFlow

WORDS = ["a", "b", "c", "d", "x"]


@dataclass(frozen=True)
class Case:
    seed: int
    rows: int
    batch_size: int
    source: int  # parallelism of each stage
    split: int
    count: int
    window: bool  # a window stage over the counts, in event time (else the fold's updates are the output)

    def lines(self) -> list[str]:
        rng = random.Random(self.seed)
        return [" ".join(rng.choice(WORDS) for _ in range(rng.randrange(0, 4))) for _ in range(self.rows)]

    def build(self, tagged: bool) -> Dataflow:
        """The flow; ``tagged``: the oracle's, whose records carry the rows they came from."""
        flow = Dataflow("lineage-case", batch_size=self.batch_size)
        stream = flow.source(Fed(), parallelism=self.source,
                             time=EventTime(_row_time, max_delay_s=0) if self.window else None)
        split = _tagged_split if tagged else _split
        counts = (stream.flat_map(split, parallelism=self.split).filter(_not_x if not tagged else _tagged_not_x)
                  .key_by(_word).fold(_zero_tagged if tagged else _zero, _count_tagged if tagged else _count,
                                      parallelism=self.count))
        if self.window:
            counts = counts.key_by(_word).window(Tumbling(0.01), _zero_tagged if tagged else _zero,
                                                 _add_tagged if tagged else _add, parallelism=self.count)
        counts.collect()
        return flow


def _row_time(record):  # a row's time: its index in ms (a tagged row is (index, line))
    return record[0] / 1000 if isinstance(record, tuple) else 0.0


def _split(line):
    return line.split() if isinstance(line, str) else line[1].split()


def _tagged_split(row):
    return [(w, frozenset([row[0]])) for w in row[1].split()]


def _not_x(word):
    return word != "x"


def _tagged_not_x(word):
    return word[0] != "x"


def _word(record):
    return record if isinstance(record, str) else record[0]


def _zero():
    return 0


def _count(n, _word):
    return n + 1


def _zero_tagged():
    return 0, frozenset()


def _count_tagged(state, word):
    return state[0] + 1, state[1] | word[1]


def _add(total, update):
    return total + 1


def _add_tagged(state, update):
    return state[0] + 1, state[1] | update[1][1]


@st.composite
def cases(draw):
    return Case(seed=draw(st.integers(0, 2**32)), rows=draw(st.integers(1, 120)), batch_size=draw(st.integers(1, 16)),
                source=draw(st.integers(1, 2)), split=draw(st.integers(1, 3)), count=draw(st.integers(1, 3)),
                window=draw(st.booleans()))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    loop = asyncio.new_event_loop()
    shards = [loop.run_until_complete(RedisShard.start(tmp_path_factory.mktemp(f"s{i}"), "pw")) for i in range(2)]
    client = ShardedStore([s.address for s in shards], "pw")
    yield loop, client
    for shard in shards:
        loop.run_until_complete(shard.stop())
    loop.close()


async def stored(client, name: str, plan, id_kinds: dict, captured) -> None:
    """What a local run's operators would have written, in the store, with the flow's shape."""
    await save_flow(client, name, flow_shape(plan, id_kinds))
    queue = RelationQueue(client)
    for writes in captured.writes:
        queue.add(writes)
    await queue.write(queue.take())


def run(case: Case, flow_name: str, tagged: bool):
    plan = case.build(tagged).plan
    if not tagged:
        plan.lineage, plan.lineage_keep = flow_name, None
    local = LocalFlow(plan, case.seed)
    lines = case.lines()
    local.feed([(i, line) for i, line in enumerate(lines)] if tagged or case.window else lines)
    return plan, local.finish()


@property_settings(ci_examples=30)
@given(cases())
def test_backward_and_forward_queries_equal_the_provenance_oracle(store, case):
    loop, client = store
    name = f"case.{uuid.uuid4().hex}"  # each example its own keys in the store
    plan, captured = run(case, name, tagged=False)
    _, oracle = run(case, name, tagged=True)
    # The same schedule: the same values, in the same order (the oracle's carry their rows too).
    assert [_untagged(o) for o in oracle.outputs] == captured.outputs
    ids = captured.ids.get("outputs", [])
    assert len(ids) == len(captured.outputs)

    async def write_and_query():
        await stored(client, name, plan, {0: "row"}, captured)
        reader = RelationReader(client)
        backward = [await queries.backward(reader, rid) for rid in ids]
        forward = {row: await queries.forward(reader, SourceRecord(name, "source0", row)) for row in range(case.rows)}
        return backward, forward

    backward, forward = loop.run_until_complete(write_and_query())
    for rid, trace, tagged in zip(ids, backward, oracle.outputs, strict=True):
        assert not trace.expired
        assert {s.id for s in trace.ends} == _rows_of(tagged), (rid, tagged)
    for row, trace in forward.items():
        reached = {ids.index(r) for r in trace.ends if isinstance(r, RecordId) and r in ids}
        assert reached == {k for k, tagged in enumerate(oracle.outputs) if row in _rows_of(tagged)}, row


def _rows_of(tagged):
    return set(tagged[-1][1])


def _untagged(output):
    if len(output) == 2:  # (word, (count, rows))
        return output[0], output[1][0]
    key, start, end, (count, _) = output
    return key, start, end, count


class Relay(KeyedProcess):
    """Per key: counts its records, emits the count on each record, and a total at a timer 0.05 s
    after each (what a timer emits comes of the key's records so far). The oracle's version
    carries the rows its records came from in its state."""

    def __init__(self, tagged: bool) -> None:
        self.tagged = tagged

    def on_record(self, ctx, record):
        n, rows = ctx.state or (0, frozenset())
        ctx.state = (n + 1, rows | record[3]) if self.tagged else (n + 1, rows)
        ctx.timer(ctx.time + 0.05)
        yield (ctx.key, ctx.state) if self.tagged else (ctx.key, ctx.state[0])

    def on_timer(self, ctx, at):
        yield (ctx.key, ctx.state) if self.tagged else (ctx.key, ctx.state[0])


@dataclass(frozen=True)
class JoinCase:
    seed: int
    kind: str  # "interval", "pairs", "groups" or "process"
    rows: int
    batch_size: int
    parallelism: int

    def events(self, side: int) -> list[tuple]:
        rng = random.Random(self.seed * 2 + side)
        return [(f"k{rng.randrange(4)}", i * 0.01 + rng.randrange(3) * 0.003, rng.randrange(9))
                for i in range(self.rows)]

    def build(self, tagged: bool) -> Dataflow:
        flow = Dataflow("joins", batch_size=self.batch_size)
        time = EventTime(lambda e: e[1], max_delay_s=0.01)
        left = flow.source(Fed(), time=time, name="left").key_by(lambda e: e[0])
        if self.kind == "process":
            left.process(Relay(tagged), parallelism=self.parallelism).collect()
            return flow
        both = left.connect(flow.source(Fed(), time=time, name="right").key_by(lambda e: e[0]))
        if self.kind == "interval":
            both.interval_join(0.02, 0.01, parallelism=self.parallelism).collect()
        elif self.kind == "pairs":
            both.window_join(Tumbling(0.05), parallelism=self.parallelism).collect()
        else:
            both.window_cogroup(Tumbling(0.05), parallelism=self.parallelism).collect()
        return flow


def _join_rows(output) -> set:
    """The (source, row) tags of a tagged output: a pair's two records', a group's all, a relay's state."""
    if len(output) == 2:  # a relay: (key, (n, rows))
        return set(output[1][1])
    if len(output) == 3:  # a pair: (key, left, right)
        return set(output[1][3]) | set(output[2][3])
    return {tag for side in output[3:] for record in side for tag in record[3]}


def _untag(output):
    if len(output) == 2:
        return output[0], output[1][0]
    if len(output) == 3:
        return output[0], output[1][:3], output[2][:3]
    return (*output[:3], *([record[:3] for record in side] for side in output[3:]))


@property_settings(ci_examples=20)
@given(st.builds(JoinCase, seed=st.integers(0, 2**32), kind=st.sampled_from(["interval", "pairs", "groups", "process"]),
                 rows=st.integers(1, 60), batch_size=st.integers(1, 12), parallelism=st.integers(1, 3)))
def test_joins_and_process_functions_name_both_sides_and_the_keys_records(store, case):
    loop, client = store
    name = f"joins.{uuid.uuid4().hex}"
    runs = []
    for tagged in (False, True):
        plan = case.build(tagged).plan
        if not tagged:
            plan.lineage, plan.lineage_keep = name, None
        local = LocalFlow(plan, case.seed)
        for s, side in zip(plan.sources, ("left", "right"), strict=False):
            events = case.events(s)
            local.feed([(*e, frozenset([(side, i)])) if tagged else e for i, e in enumerate(events)], source=s)
        runs.append((plan, local.finish()))
    (plan, captured), (_, oracle) = runs
    assert [_untag(o) for o in oracle.outputs] == captured.outputs
    ids = captured.ids.get("outputs", [])

    async def query():
        await stored(client, name, plan, {s: "row" for s in plan.sources}, captured)
        reader = RelationReader(client)
        rows = [(side, i) for side in ("left", "right")[:len(plan.sources)] for i in range(case.rows)]
        return ([await queries.backward(reader, rid) for rid in ids],
                {row: await queries.forward(reader, SourceRecord(name, *row)) for row in rows})

    backward, forward = loop.run_until_complete(query())
    for trace, tagged in zip(backward, oracle.outputs, strict=True):
        assert {(s.source, s.id) for s in trace.ends} == _join_rows(tagged) and not trace.expired
    for row, trace in forward.items():  # (a process function's timers' outputs included)
        assert {ids.index(r) for r in trace.ends} == {k for k, o in enumerate(oracle.outputs) if row in _join_rows(o)}


def test_a_flow_capturing_some_stages_names_the_records_where_the_walk_stops(store):
    loop, client = store
    case = Case(seed=3, rows=40, batch_size=5, source=1, split=2, count=2, window=False)
    plan = case.build(tagged=False).plan
    name = f"partial.{uuid.uuid4().hex}"
    plan.lineage, plan.lineage_keep = name, None
    plan.lineage_stages = frozenset({plan.stages[2].name})  # the counts, not the split
    local = LocalFlow(plan, case.seed)
    local.feed(case.lines())
    captured = local.finish()

    async def query():
        await stored(client, name, plan, {0: "row"}, captured)
        return [await queries.backward(RelationReader(client), rid) for rid in captured.ids["outputs"]]

    for (_, n), trace in zip(captured.outputs, loop.run_until_complete(query()), strict=True):
        # Each update's words, named by the split instance that emitted them, where the walk stopped.
        assert not trace.ends and len(trace.expired) == n
        assert all(r.stage == 1 for r in trace.expired)


def test_a_fold_that_emits_at_the_end_relates_each_key_to_every_row_it_counted(store):
    loop, client = store
    lines = Case(seed=9, rows=60, batch_size=4, source=1, split=2, count=2, window=False).lines()
    flow = Dataflow("final", batch_size=4)
    (flow.source(Fed()).flat_map(str.split, parallelism=2).key_by(_word)
     .fold(_zero, _count, parallelism=2, emit="final").collect())
    plan = flow.plan
    name = f"final.{uuid.uuid4().hex}"
    plan.lineage, plan.lineage_keep = name, None
    local = LocalFlow(plan, 9)
    local.feed(lines)
    captured = local.finish()  # (every task before the end emitted nothing)

    async def query():
        await stored(client, name, plan, {0: "row"}, captured)
        reader = RelationReader(client)
        return ([await queries.backward(reader, rid) for rid in captured.ids["outputs"]],
                [await queries.forward(reader, SourceRecord(name, "source0", row)) for row in range(len(lines))])

    backward, forward = loop.run_until_complete(query())
    ids = captured.ids["outputs"]
    for (word, _), trace in zip(captured.outputs, backward, strict=True):
        assert {s.id for s in trace.ends} == {row for row, line in enumerate(lines) if word in line.split()}
    for row, trace in enumerate(forward):
        assert {captured.outputs[ids.index(r)][0] for r in trace.ends} == set(lines[row].split())
