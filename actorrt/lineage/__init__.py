"""The lineage stash protocol as data structures (stash, specs, replay order, checkpoints) and the
fault-tolerance strategies that drive it; no sockets, so it is tested without them."""
