"""The order the lineage store writes a batch in: never a spec before its dependencies."""

from __future__ import annotations

from actorrt.rpc import common_pb2 as pb
from actorrt.store.lineage_store import dependency_waves


def _spec(name: str, parent: str = "", *producers: str, predecessor: str = "") -> pb.TaskSpec:
    deps = [parent, predecessor, *producers]
    return pb.TaskSpec(task_id=name.encode(), dependencies=[d.encode() for d in deps])


def _names(waves) -> list[set[str]]:
    return [{s.task_id.decode() for s in wave} for wave in waves]


def test_each_spec_is_written_after_the_specs_of_the_batch_that_produced_it():
    specs = [_spec("a"), _spec("b", "", "a"), _spec("c", "a", "outside"), _spec("d", "b", "c"), _spec("e", "outside"),
             _spec("f", predecessor="a")]  # an actor's own chain: replay stops at a gap in it
    waves = dependency_waves({s.task_id: s for s in specs})
    assert _names(waves) == [{"a", "e", "f"}, {"b", "c"}, {"d"}]


def test_a_long_chain_needs_no_recursion_and_a_malformed_cycle_still_ends():
    chain = [_spec("t0")] + [_spec(f"t{i}", f"t{i - 1}") for i in range(1, 5000)]
    waves = dependency_waves({s.task_id: s for s in chain})
    assert [w[0].task_id for w in waves] == [s.task_id for s in chain]
    cycle = [_spec("x", "y"), _spec("y", "x")]
    assert sorted(n for w in _names(dependency_waves({s.task_id: s for s in cycle})) for n in w) == ["x", "y"]
