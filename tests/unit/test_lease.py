"""The node lease: granted from when a heartbeat left, so it runs out before the head can declare
the node dead; a stopped process that resumes holds no lease until a new heartbeat is granted."""

from __future__ import annotations

import asyncio

import pytest

from actorrt.util import lease as lease_module
from actorrt.util.lease import Lease


@pytest.fixture
def clock(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(lease_module, "monotonic", lambda: now[0])
    return now


def test_a_lease_counts_from_when_the_heartbeat_was_sent_not_when_the_grant_came(clock):
    lease = Lease()
    assert lease.valid()  # a driver's: unlimited
    lease.limit(clock[0], 5.0)
    beat = lease.heartbeat()  # sent at 100
    clock[0] = 104.0
    lease.granted(beat, 5.0)  # answered late: still until 105
    clock[0] = 105.5
    assert not lease.valid()


def test_after_a_long_stop_only_a_heartbeat_sent_since_renews_the_lease(clock):
    lease = Lease()
    lease.limit(clock[0], 5.0)
    before = lease.heartbeat()
    clock[0] = 160.0  # stopped for a minute: the head has declared it dead meanwhile
    lease.granted(before, 5.0)  # a grant for the heartbeat sent before the stop
    assert not lease.valid()
    after = lease.heartbeat()
    lease.granted(after, 5.0)
    assert lease.valid()


async def test_held_waits_for_a_grant_and_a_revoked_lease_never_comes_back(clock):
    lease = Lease()
    lease.limit(clock[0] - 10, 5.0)
    waiter = asyncio.ensure_future(lease.held())
    await asyncio.sleep(0.01)
    assert not waiter.done()
    lease.granted(lease.heartbeat(), 5.0)
    await asyncio.wait_for(waiter, 1.0)

    why = []
    lease.on_revoked = why.append
    lease.revoke("replaced")
    lease.granted(lease.heartbeat(), 5.0)
    assert not lease.valid() and why == ["replaced"]
