"""How a head starts on the cluster's state: a new cluster, or the one a dead head left.

``open_state`` starts the store shards (or adopts the ones a dead head ran) and creates the
cluster's state in the store, or reads it back; with an external store, only once no other head
holds the cluster's lease (``leadership.py``). ``takeover_plan`` says, for each slot the dead
head's last view names, what the new head does with it; it is pure, and tested without processes.
"""

from __future__ import annotations

import enum
import logging
import os
import time
from pathlib import Path

from actorrt.cluster import leadership
from actorrt.cluster.head_options import HeadOptions
from actorrt.cluster.head_state import HeadState, Restored, SupersededError
from actorrt.cluster.store_shards import StoreShards
from actorrt.exceptions import ClusterError
from actorrt.rpc import head_pb2
from actorrt.store.clients import ShardedStore, until_reachable
from actorrt.store.opening import open_store

log = logging.getLogger("actorrt.head")


async def open_state(shards: StoreShards, options: HeadOptions, session_dir: Path, restarted: bool,
                     standby: bool = False, former_address: str = "") -> tuple[HeadState, bytes, Restored | None]:
    """The store's shards running and the cluster's state in it: ``(state, cluster id, what a dead
    head left)``; the last is None for a new cluster. A ``standby`` head first waits until no other
    holds the cluster's lease, then takes the cluster over as a restarted one; a restarted head
    whose lease another head holds (at another address than its ``former_address``) was replaced."""
    if not options.store_url:
        if restarted:
            await shards.adopt(session_dir)
        else:
            await shards.start(session_dir, options.host, options.store_shards)
    state = HeadState(open_store(options.store_url, shards.tls, options.store_replicas) if options.store_url
                      else ShardedStore(shards.addresses, shards.password, tls=shards.tls, replicas=shards.replicas))
    if options.store_url:
        await _check_replicas(state, options.store_replicas)
        holder = await until_reachable("reading the head's lease", leadership.leader, state.store)
        if standby:
            await leadership.wait_for_vacancy(state.store, former_address)
            restarted = True
        elif restarted and holder not in (None, former_address, leadership.STOPPED):
            raise SupersededError(f"the head at {holder} holds the cluster's lease: it has replaced this one")
        elif not restarted and holder not in (None, leadership.STOPPED):
            raise ClusterError(f"a head at {holder} runs a cluster on this store: stop it first, or back it up with "
                               "`actorrt start --head --standby`")
        elif not restarted:
            await leadership.clear_stopped(state.store)
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


async def _check_replicas(state: HeadState, wanted: int) -> None:
    """An external store whose shards lack the replicas each write must wait for would ack nothing."""
    if not wanted:
        return
    short = {address: n for address, n in (await until_reachable(
        "counting the store's replicas", state.store.replicas_connected)).items() if n < wanted}
    if short:
        raise ClusterError(f"store_replicas={wanted}, but these store shards have fewer replicas connected: "
                           + ", ".join(f"{address} ({n})" for address, n in sorted(short.items())))


class Takeover(enum.Enum):
    FOLLOW = "follow"  # not the head's to start: it reconnects by itself, or misses its heartbeats
    ADOPT = "adopt"  # its process may still run: watch it (by pid and start time)
    LAUNCH = "launch"  # declared dead, its restart due: start it
    FAIL = "fail"  # its epoch was taken, its process never started: a failure, restarted as any


def takeover_plan(view: head_pb2.ClusterView, host_id: str = "") -> list[tuple[head_pb2.NodeInfo, Takeover]]:
    """What a new head on host ``host_id`` does with each slot of the dead head's last ``view`` (a
    standby head on another host cannot watch the processes its predecessor started)."""
    plan = []
    for info in view.nodes:
        if not info.managed or (info.pid and host_id and info.host_id and info.host_id != host_id
                                and info.state != head_pb2.DEAD):
            action = Takeover.FOLLOW
        elif info.state == head_pb2.DEAD:
            action = Takeover.LAUNCH
        elif info.pid:
            action = Takeover.ADOPT
        else:
            action = Takeover.FAIL
        plan.append((info, action))
    return plan
