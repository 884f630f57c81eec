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
import os
import time
from collections.abc import Awaitable, Callable
from typing import NoReturn

from actorrt.cluster.supervisor import SUPERSEDED_EXIT
from actorrt.exceptions import ClusterError
from actorrt.rpc import head_pb2
from actorrt.store.clients import Store, script_call
from actorrt.store.opening import store_of_view
from actorrt.store.tls import StoreTls

log = logging.getLogger("actorrt.head")

LEADER_LEASE_S = 5.0
STEP_DOWN_S = 0.8 * LEADER_LEASE_S  # a head that has not renewed for this long acts no more
RENEW_TIMEOUT_S = 0.05
_LEADER = b"{actorrt:head}:leader"
_CLUSTER = b"{actorrt:head}:cluster"  # (head_state.py's)

# KEYS: leader, cluster hash; ARGV: address, incarnation, lease ms. Sets or renews the lease if the
# incarnation is the store's newest; returns 1 then, 0 if a later head has started, -1 if the
# cluster was stopped.
_HOLD = """
if redis.call('HGET', KEYS[1], 'stopped') then return -1 end
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


async def _hold(store: Store, address: str, incarnation: int) -> int:
    return int(await script_call(store, _HOLD, [_LEADER, _CLUSTER], [address, incarnation, int(LEADER_LEASE_S * 1000)]))


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


class LeaderLease:
    """This head's hold on the lease. It counts from when a renewal was *sent* (it may have reached
    the store any time after), and the head takes it for lost well before the store would: a
    standby may take over once it runs out, so past ``STEP_DOWN_S`` without a renewal this head
    acts no more (``valid``)."""

    def __init__(self, store: Store, address: str, incarnation: int) -> None:
        self._store, self._address, self._incarnation = store, address, incarnation
        self._renewed = -LEADER_LEASE_S  # monotonic time the last successful renewal was sent

    def valid(self) -> bool:
        return time.monotonic() < self._renewed + STEP_DOWN_S

    async def take(self) -> bool:
        """Set the lease; False if a later head has started, or the cluster was stopped."""
        return await self._renew(STEP_DOWN_S) == 1

    async def _renew(self, timeout: float) -> int:
        sent = time.monotonic()
        async with asyncio.timeout(timeout):
            held = await _hold(self._store, self._address, self._incarnation)
        if held == 1:
            self._renewed = sent
        return held

    def check(self) -> None:
        """Before the head acts on nodes (grants, kills, restarts, views): exit if the lease may
        have run out (it was paused, or cut off from the store), rather than act beside a standby
        that took over. Its supervisor restarts it, and it takes the cluster back only if none did."""
        if not self.valid():
            step_down(1, f"the head's lease in the store was not renewed for {STEP_DOWN_S:g} s")

    async def run(self, stopping: Callable[[], bool]) -> None:
        """Keep the lease while the head runs; exit the process once it cannot."""
        outcome = await self.keep(stopping)
        if outcome is not None:
            superseded, why = outcome
            step_down(SUPERSEDED_EXIT if superseded else 1, why)

    async def keep(self, stopping: Callable[[], bool]) -> tuple[bool, str] | None:
        """Renew the lease until this head cannot: returns whether a later head started, and why
        it stopped (that, or no renewal for ``STEP_DOWN_S``); None once ``stopping()``."""
        while True:
            await asyncio.sleep(LEADER_LEASE_S / 5)
            if stopping():
                return None
            try:  # bounded by what is left of the lease as this head counts it
                held = await self._renew(max(self._renewed + STEP_DOWN_S - time.monotonic(), RENEW_TIMEOUT_S))
            except (ClusterError, TimeoutError) as exc:
                if not self.valid():
                    return False, f"could not renew the head's lease for {STEP_DOWN_S:g} s ({exc or 'no answer'})"
                continue
            if held == 0:
                return True, "another head has taken over the cluster"
            if held < 0:
                return None  # stopped on purpose: this head is stopping too


def step_down(code: int, why: str) -> NoReturn:
    """Exit the head's process at once, acting no further (``SUPERSEDED_EXIT``: its supervisor
    does not restart it)."""
    log.critical("%s; exiting", why)
    os._exit(code)


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
