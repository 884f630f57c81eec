"""Record lineage, captured by the operators' own logic and queried from a real redis-server,
against a plain-Python provenance oracle: the same flow run with every record tagged with the
source rows it came from (a fold and a window take the union of their records' tags).

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
from actorrt.streaming import Dataflow, EventTime, Fed, Tumbling
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


def run(case: Case, flow_name: str, tagged: bool):
    plan = case.build(tagged).plan
    if not tagged:
        plan.lineage, plan.lineage_keep = flow_name, None
    local = LocalFlow(plan, case.seed)
    lines = case.lines()
    local.feed([(i, line) for i, line in enumerate(lines)] if tagged or case.window else lines)
    return plan, local.finish()


@property_settings(ci_examples=40)
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
        await save_flow(client, name, flow_shape(plan, {0: "row"}))
        queue = RelationQueue(client)
        for writes in captured.writes:
            queue.add(writes)
        await queue.write()
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
