"""A node's lease from the store, for when the head's grants stop coming (the head is down or
restarting): running work goes on without the head.

A node renews its lease in the store once what the head granted is half spent. The store grants
it only to an incarnation the head has not declared dead: before the head declares one dead it
raises that slot's fence to its epoch, which refuses every later renewal, and it waits out a store
lease the incarnation may still hold (unless the process is known to have exited). As with the
head's grants, the node counts a lease from when it *sent* the renewal and the store from when it
*received* it, so the node's copy runs out first.
"""

from __future__ import annotations

from actorrt.store.clients import Store, script_call, until_reachable

# Beside the head's state (one hash tag: one shard, or one Redis Cluster slot).
# slot -> the highest epoch the head declared dead (a new cluster deletes it with the head's state)
DEAD_EPOCHS = b"{actorrt:head}:dead"


def _lease_key(slot: int) -> bytes:
    return b"{actorrt:head}:lease:%d" % slot


# KEYS: the slot's lease, the dead epochs. ARGV: slot, epoch, milliseconds. 1: granted; 0: fenced.
_RENEW = """
local dead = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if dead >= tonumber(ARGV[2]) then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
"""

# KEYS: the slot's lease, the dead epochs. ARGV: slot, epoch. Returns the milliseconds the
# incarnation's lease still runs (0 if it holds none).
_FENCE = """
local dead = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if tonumber(ARGV[2]) > dead then redis.call('HSET', KEYS[2], ARGV[1], ARGV[2]) end
if redis.call('GET', KEYS[1]) == ARGV[2] then return math.max(redis.call('PTTL', KEYS[1]), 0) end
return 0
"""


async def _call(store: Store, source: str, slot: int, args: list) -> int:
    return int(await script_call(store, source, [_lease_key(slot), DEAD_EPOCHS], [slot, *args]))


async def renew(store: Store, slot: int, epoch: int, seconds: float) -> bool:
    """Ask the store for ``seconds`` more; False if the incarnation was declared dead."""
    return bool(await _call(store, _RENEW, slot, [epoch, int(seconds * 1000)]))


async def fence(store: Store, slot: int, epoch: int) -> float:
    """Refuse the incarnation any further lease; returns the seconds the one it holds still runs."""
    remaining = await until_reachable(f"fencing node {slot} (epoch {epoch})", _call, store, _FENCE, slot, [epoch])
    return remaining / 1000

