"""The chaos soak's pipeline, short and seeded: mappers, nondeterministic reducers with checkpoints,
and an exactly-once file sink fed by fire-and-forget emits, while random faults hit it: nodes
SIGKILLed (two at once a quarter of the time) or hung and resumed, store shards SIGKILLed, and an
oversized call. The oracle is plain Python over the same lines (``Expected``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import cloudpickle
import pytest

SOAK = Path(__file__).parents[2] / "scripts" / "chaos_soak.py"
_spec = importlib.util.spec_from_file_location("chaos_soak", SOAK)
chaos_soak = importlib.util.module_from_spec(_spec)
sys.modules["chaos_soak"] = chaos_soak  # its dataclasses look their module up
_spec.loader.exec_module(chaos_soak)
cloudpickle.register_pickle_by_value(chaos_soak)  # node processes cannot import it by name


@pytest.mark.parametrize("seed", [11])  # more seeds: python scripts/chaos_soak.py
def test_the_pipeline_loses_and_duplicates_nothing_under_random_faults(cluster_with, tmp_path, seed):
    with cluster_with(num_nodes=chaos_soak.NUM_NODES, store_shards=2, heartbeat_timeout=chaos_soak.HEARTBEAT_TIMEOUT_S):
        outcome = chaos_soak.run_round(seed, seconds=3.0, wait_s=90.0, directory=tmp_path)
    assert sum(outcome.faults.values()) >= 2
    assert (outcome.lost, outcome.duplicated, outcome.stuck) == (0, 0, False), outcome.detail
