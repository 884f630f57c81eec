"""How a head starts on the cluster's state: a new cluster, or the one a dead head left.

``open_state`` starts the store shards (or adopts the ones a dead head ran) and creates the
cluster's state in the store, or reads it back. ``takeover_plan`` says, for each slot the dead
head's last view names, what the new head does with it; it is pure, and tested without processes.
"""

from __future__ import annotations

import enum
import logging
import os
import time
from pathlib import Path

from actorrt.cluster.head_options import HeadOptions
from actorrt.cluster.head_state import HeadState, Restored
from actorrt.cluster.store_shards import StoreShards
from actorrt.rpc import head_pb2
from actorrt.store.clients import ShardedStore, open_store

log = logging.getLogger("actorrt.head")


async def open_state(shards: StoreShards, options: HeadOptions, session_dir: Path,
                     restarted: bool) -> tuple[HeadState, bytes, Restored | None]:
    """The store's shards running and the cluster's state in it: ``(state, cluster id, what a dead
    head left)``; the last is None for a new cluster."""
    if not options.store_url:
        if restarted:
            await shards.adopt(session_dir)
        else:
            await shards.start(session_dir, options.host, options.store_shards)
    state = HeadState(open_store(options.store_url, shards.tls, options.store_replicas) if options.store_url
                      else ShardedStore(shards.addresses, shards.password, tls=shards.tls, replicas=shards.replicas))
    if not restarted:
        cluster_id = os.urandom(8)
        await state.create(cluster_id)
        return state, cluster_id, None
    started = time.perf_counter()
    restored = await state.resume()
    log.info("read the cluster's state back (incarnation %d: %d nodes, %d named actors) in %.1f ms",
             restored.incarnation, len(restored.view.nodes) if restored.view else 0, len(restored.names),
             (time.perf_counter() - started) * 1e3)
    return state, restored.cluster_id, restored


class Takeover(enum.Enum):
    FOLLOW = "follow"  # not the head's to start: it reconnects by itself, or misses its heartbeats
    ADOPT = "adopt"  # its process may still run: watch it (by pid and start time)
    LAUNCH = "launch"  # declared dead, its restart due: start it
    FAIL = "fail"  # its epoch was taken, its process never started: a failure, restarted as any


def takeover_plan(view: head_pb2.ClusterView) -> list[tuple[head_pb2.NodeInfo, Takeover]]:
    """What a new head does with each slot of the dead head's last ``view``."""
    plan = []
    for info in view.nodes:
        if not info.managed:
            action = Takeover.FOLLOW
        elif info.state == head_pb2.DEAD:
            action = Takeover.LAUNCH
        elif info.pid:
            action = Takeover.ADOPT
        else:
            action = Takeover.FAIL
        plan.append((info, action))
    return plan
