"""Which head is the cluster's active one: a lease in the store, held by the newest incarnation.

The key ``{actorrt:head}:leader`` names the active head's address and incarnation, and expires
``LEADER_LEASE_S`` after the head last renewed it. Only the head whose incarnation is the one the
store counted last (``head_state.py``) may set or renew it, so a head that another has replaced
(it was stopped past its lease, or cut off from the store) learns so at its next renewal and
exits; every write of its state was refused from the moment the other started anyway.

A head restarted by its supervisor takes over at once if the lease names its own address (or
none); a standby head (``actorrt start --head --standby``, on another host) waits until the lease
has expired. Nodes and drivers that lose their head read the key to find where the active one
serves now (``locate``). A cluster stopped on purpose leaves the key saying so, without expiry:
a standby then exits instead of taking the cluster over.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from actorrt.exceptions import ClusterError
from actorrt.rpc import head_pb2
from actorrt.store.clients import Store, script_call, store_of_view
from actorrt.store.tls import StoreTls

log = logging.getLogger("actorrt.head")

LEADER_LEASE_S = 5.0
_LEADER = b"{actorrt:head}:leader"
_CLUSTER = b"{actorrt:head}:cluster"  # (head_state.py's)

# KEYS: leader, cluster hash; ARGV: address, incarnation, lease ms. Sets or renews the lease if the
# incarnation is the store's newest; returns 1 then, else 0 (a later head has started).
_HOLD = """
if redis.call('HGET', KEYS[2], 'incarnation') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'address', ARGV[1], 'incarnation', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""
# KEYS: leader, cluster hash; ARGV: incarnation. The cluster was stopped (by its newest head).
_STOPPED = """
if redis.call('HGET', KEYS[2], 'incarnation') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'stopped', 1)
return 1
"""
_READ = "return redis.call('HMGET', KEYS[1], 'address', 'stopped')"
STOPPED = "stopped"  # what ``leader`` answers for a cluster stopped on purpose


class NothingToTakeOverError(ClusterError):
    """The cluster this standby backs up was stopped on purpose: there is nothing to take over."""


async def leader(store: Store) -> str | None:
    """The address the lease names, ``STOPPED``, or None if no head holds it (it expired)."""
    address, stopped = await script_call(store, _READ, [_LEADER], [])
    return STOPPED if stopped else (address.decode() if address else None)


async def stopped(store: Store, incarnation: int) -> None:
    """Say the cluster was stopped on purpose (a standby exits, it does not take over)."""
    await script_call(store, _STOPPED, [_LEADER, _CLUSTER], [incarnation])


async def clear_stopped(store: Store) -> None:
    """A new cluster starts on this store: forget that a former one was stopped."""
    await script_call(store, "return redis.call('HDEL', KEYS[1], 'stopped')", [_LEADER], [])


async def hold(store: Store, address: str, incarnation: int) -> bool:
    """Set or renew the lease for the head of ``incarnation`` at ``address``; False if a later
    head has started."""
    return bool(await script_call(store, _HOLD, [_LEADER, _CLUSTER],
                                  [address, incarnation, int(LEADER_LEASE_S * 1000)]))


async def wait_for_vacancy(store: Store, own_address: str = "") -> None:
    """Return once no other head holds the lease: it expired, or names ``own_address`` (this head's
    own, before it was restarted)."""
    announced = False
    while True:
        try:
            holder = await leader(store)
        except ClusterError as exc:
            log.warning("standing by: the store does not answer (%s)", exc)
            holder = "?"
        if holder == STOPPED:
            raise NothingToTakeOverError("the cluster this head stands by for was stopped: nothing to take over")
        if holder is None or holder == own_address:
            return
        if not announced and holder != "?":
            log.info("standing by: the active head serves on %s", holder)
            announced = True
        await asyncio.sleep(LEADER_LEASE_S / 10)


async def keep(store: Store, address: str, incarnation: int) -> tuple[bool, str]:
    """Renew the lease until this head cannot: returns whether a later head started, and why it
    stopped (that, or the store did not answer for so long that another may take over now)."""
    renewed = time.monotonic()
    while True:
        await asyncio.sleep(LEADER_LEASE_S / 5)
        try:
            if not await hold(store, address, incarnation):
                return True, "another head has taken over the cluster"
            renewed = time.monotonic()
        except ClusterError as exc:
            # Past most of the lease a standby may be about to take over: step down first.
            if time.monotonic() - renewed > LEADER_LEASE_S * 0.8:
                return False, f"could not renew the head's lease for {time.monotonic() - renewed:.1f} s ({exc})"


def locator(view: Callable[[], head_pb2.ClusterView], tls: StoreTls | None) -> Callable[[], Awaitable[str | None]]:
    """For a node or driver: where the active head serves, by the store its latest ``view`` names
    (None with the head's own shards: their head is the only one)."""

    async def locate() -> str | None:
        latest = view()
        if not latest.store_url:
            return None
        store = store_of_view(latest, tls)
        try:
            found = await leader(store)
        finally:
            await store.aclose()
        return None if found == STOPPED else found

    return locate
