"""A head's node slots: what it knows of each, which live slot inherits a dead one's actors, and
the global rollback that takes every node back."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from actorrt.rpc import head_pb2, node_pb2
from actorrt.util.children import Child

log = logging.getLogger("actorrt.head")

# A slot whose process dies before registering is restarted after a growing pause (a node that
# cannot start, e.g. a broken environment, must not be relaunched in a tight loop). A node that
# fails after registering is restarted at once.
MAX_RESTART_DELAY_S = 30.0
# A heartbeat grants its node a lease this fraction of the heartbeat timeout long: the lease runs
# out well before the head could declare the node dead (a margin for a slow head, and clock rates).
LEASE_FRACTION = 0.5


@dataclass
class Slot:
    info: head_pb2.NodeInfo
    process: Child | None = None
    restart_delay: float = 0.0
    last_heartbeat: float = 0.0
    killed_at: float | None = None  # KillNode sent SIGKILL then (loop time)
    failed_at: float = 0.0  # declared dead then
    detection_ms: float = 0.0  # from the kill (or the last heartbeat) to the declaration
    granted_until: float = 0.0  # loop time by which the lease of its last accepted heartbeat has run out
    stats: node_pb2.NodeStatsReply = field(default_factory=node_pb2.NodeStatsReply)


def heir_for(slots: Iterable[Slot]) -> int | None:
    """The live slot hosting the fewest actors (the lowest number among equals); None if none lives."""
    alive = [s for s in slots if s.info.state == head_pb2.ALIVE]
    return min(alive, key=lambda s: (len(s.stats.actors), s.info.slot)).info.slot if alive else None


def roll_back(slots: Iterable[Slot], failed: int, now: float, only: Iterable[int] | None = None) -> list[int]:
    """Kill every other live node the head started (or those of them in ``only``) and declare it
    dead: each restarts from the last global checkpoint. Returns their slots, to restart."""
    only = None if only is None else set(only)
    gone = []
    for other in slots:
        if other.info.slot == failed or other.info.state != head_pb2.ALIVE or (only is not None
                                                                               and other.info.slot not in only):
            continue
        if other.process is None:
            log.error("node %d was not started by this head and cannot be rolled back", other.info.slot)
            continue
        log.warning("rolling node %d back to the last global checkpoint", other.info.slot)
        other.process.kill()
        other.info.state = head_pb2.DEAD
        other.info.last_failure = f"{time.strftime('%H:%M:%S')} rolled back: node {failed} failed"
        other.failed_at, other.detection_ms = now, 0.0
        gone.append(other.info.slot)
    return gone
