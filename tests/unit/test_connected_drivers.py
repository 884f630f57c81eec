"""The drivers a head knows, and their lineage stashes' numbers, without sockets."""

from __future__ import annotations

from actorrt.cluster.connected_drivers import ConnectedDrivers
from actorrt.rpc import node_pb2


def test_a_driver_s_lineage_is_kept_while_it_is_connected_and_forgotten_when_it_leaves():
    changes = []
    drivers = ConnectedDrivers(lambda: changes.append(1))
    drivers.joined("a:1")
    drivers.joined("a:1")  # a second subscription of the same driver
    drivers.lineage["a:1"] = node_pb2.LineageStats(stash_size=5)
    drivers.left("a:1")
    assert drivers.lineage["a:1"].stash_size == 5  # one subscription is still open
    drivers.left("a:1")
    assert "a:1" not in drivers.lineage and "a:1" not in drivers.connected and list(drivers.departed) == ["a:1"]
    assert len(changes) == 3


async def test_a_driver_that_does_not_come_back_to_a_restarted_head_is_forgotten_with_its_lineage():
    drivers = ConnectedDrivers(lambda: None)
    drivers.restore(["a:1", "b:2"], [])
    drivers.joined("b:2")
    drivers.lineage["b:2"] = node_pb2.LineageStats(stash_size=1)
    await drivers.missing_after(0.0)
    assert list(drivers.connected) == ["b:2"] and list(drivers.departed) == ["a:1"] and "b:2" in drivers.lineage
