"""Record lineage on a real cluster: queries after a node kill (the replayed operators number
their records alike and write the same relations once), retention, the modes that cannot
capture it, the CLI, and a plain actor relating records it names. The oracle is plain Python
over the input."""

from __future__ import annotations

import collections

import pytest
from click.testing import CliRunner

import actorrt
from actorrt.cluster.cli import cli
from actorrt.core.record_lineage import RecordLineageUnavailableError
from actorrt.lifecycle import current_driver
from actorrt.lineage import NamedRecord, RecordId, SourceRecord
from actorrt.streaming import Dataflow, ListSource
from actorrt.streaming.testing import KillNodeAt

LINES = [f"w{i % 7} w{i % 3} x{i % 11}" for i in range(300)]


def wordcount(name: str, text: list[str], marker=None, **options) -> Dataflow:
    flow = Dataflow(name, batch_size=10, checkpoint_every=20, lineage=True, **options)
    lines = flow.source(ListSource(text))
    if marker is not None:
        lines = lines.map(KillNodeAt(150, marker), parallelism=2)
    (lines.flat_map(str.split, parallelism=2)
     .key_by(lambda word: word)
     .fold(lambda: 0, lambda n, word: n + 1, parallelism=2)
     .collect())
    return flow


# (first: its cluster cannot run beside the module's)
def test_global_rollback_cannot_capture_record_lineage(cluster_with, tmp_path):
    with cluster_with(num_nodes=1, store_shards=1, ft="checkpoint", checkpoint_dir=str(tmp_path / "ckpt")):
        with pytest.raises(RecordLineageUnavailableError, match="record lineage needs ft='lineage_stash'"):
            wordcount("rolled", LINES[:10]).run(timeout=60)


def test_queries_after_a_node_kill_equal_the_oracle(cluster, tmp_path):
    result = wordcount("killed", LINES, tmp_path / "killed").run(timeout=120)
    assert (tmp_path / "killed").exists()  # a node died mid-run
    rows_of = collections.defaultdict(set)  # word -> the rows that hold it
    for row, line in enumerate(LINES):
        for word in line.split():
            rows_of[word].add(row)
    final, sources = {}, {}
    for rid, (word, n) in zip(result.ids, result.outputs, strict=True):
        trace = actorrt.lineage.backward(rid)
        rows = sources[rid] = {s.id for s in trace.ends}
        assert not trace.expired and rows <= rows_of[word]
        assert sum(LINES[r].split().count(word) for r in rows) == n  # exactly the n records counted
        if n >= final.get(word, (0, None))[0]:
            final[word] = (n, rows)
    assert {word: rows for word, (_, rows) in final.items()} == dict(rows_of)
    # Forward from a row: the updates of its words from the one that counted it on.
    for row in (0, 151, 299):
        reached = {result.outputs[result.ids.index(r)] for r in actorrt.lineage.forward(
            SourceRecord(result.lineage, "source0", row)).ends}
        expected = {(word, n) for rid, (word, n) in zip(result.ids, result.outputs, strict=True) if row in sources[rid]}
        assert reached == expected and {w for w, _ in reached} == set(LINES[row].split())


def test_retention_drops_old_relations_and_a_query_past_it_says_so(cluster):
    result = wordcount("kept", LINES, lineage_keep=100).run(timeout=120)
    old, new = result.ids[0], result.ids[-1]
    assert actorrt.lineage.backward(old).expired  # its fold's relations are gone
    assert actorrt.lineage.backward(new).ends  # the newest are kept
    with pytest.raises(actorrt.lineage.LineageNotFoundError, match="no record lineage of a flow"):
        actorrt.lineage.backward(RecordId("no-such-flow", 0, 0, 0))



def test_the_cli_prints_a_records_chain_down_to_its_source_lines(cluster):
    result = wordcount("cli", LINES[:30]).run(timeout=60)
    driver = current_driver()
    word, n = result.outputs[-1]
    target = ["--address", driver.head_address, "--token", driver.token]
    out = CliRunner().invoke(cli, ["lineage", "backward", str(result.ids[-1]), *target])
    assert out.exit_code == 0, out.output
    rows = [int(line.rsplit("/", 1)[1]) for line in out.output.splitlines() if line.startswith(f"  {result.lineage}/")]
    assert sum(LINES[r].split().count(word) for r in rows) == n and rows
    out = CliRunner().invoke(cli, ["lineage", "forward", f"{result.lineage}/source0/{rows[0]}", *target])
    assert out.exit_code == 0 and str(result.ids[-1]) in out.output, out.output
    out = CliRunner().invoke(cli, ["lineage", "backward", "nothing/0/0/0", *target])
    assert out.exit_code == 1 and "no record lineage of a flow 'nothing'" in out.output


@actorrt.remote
class Totals:
    """A plain actor that names its records: each order ``raw/<i>`` adds to ``total/<customer>``."""

    def __init__(self):
        self.totals = collections.Counter()

    async def add(self, orders):
        for i, customer, amount in orders:
            self.totals[customer] += amount
            actorrt.lineage.relate(("orders", f"total/{customer}"), [("orders", f"raw/{i}")])
        await actorrt.commit_lineage()  # (the relations are written with the next flush; now, for the queries)
        return len(orders)

    def total(self, customer):
        return self.totals[customer]


def test_a_plain_actor_relates_the_records_it_names_through_a_node_kill(cluster):
    orders = [(i, f"c{i % 5}", i % 7) for i in range(300)]
    totals = Totals.options(node=1).remote()
    for k in range(0, len(orders), 30):
        if k == 150:
            actorrt.kill_node(1)  # its task log replays, relating the same records again
        actorrt.get(totals.add.remote(orders[k:k + 30]), timeout=60)
    for customer in {c for _, c, _ in orders}:
        trace = actorrt.lineage.backward(NamedRecord("orders", f"total/{customer}"))
        assert {r.name for r in trace.ends} == {f"raw/{i}" for i, c, _ in orders if c == customer}
        assert actorrt.get(totals.total.remote(customer), timeout=30) == sum(a for _, c, a in orders if c == customer)
    assert actorrt.lineage.forward(NamedRecord("orders", "raw/42")).ends == {NamedRecord("orders", "total/c2")}
    with pytest.raises(ValueError, match="of one namespace"):
        actorrt.lineage.relate(("a", "x"), [("b", "y")])
