"""The Lua scripts the lineage store runs: each is one atomic step on the keys of one slot group.

``LineageStore`` (``lineage_store.py``) calls them; their key and argument layouts are written
above each.
"""

# A node's writes carry its incarnation (epoch); KEYS[1] is its slot's fence, the first epoch
# allowed to write for the slot, which the incarnation that takes over sets before it reads (and
# ARGV[2] is the writer's epoch; 0 for a driver, which no one fences).
FENCE_CHECK = """
local fence = tonumber(redis.call('GET', KEYS[1]))
if fence and tonumber(ARGV[2]) > 0 and fence > tonumber(ARGV[2]) then
  return redis.error_reply('FENCED: epoch ' .. ARGV[2] .. ' of this node slot was replaced by epoch ' .. fence)
end
"""

# KEYS = fence, record_1, index_1, record_2, index_2, ...; ARGV = tombstone version, writer epoch,
# then version_i, kind_i, payload_i, task_id_i per record, with kind "s" (the whole spec) or "d" (a
# TaskVersion). Refuses the whole call if the writer's fence is past its epoch (a newer incarnation
# of its node slot took over). Applies each write whose version is newer than the one held, keeps a
# spec that arrives after a newer delta (unless the record was collected: a tombstone), and indexes
# the task under its receiver; returns the version held after the call, per record (-1 while the
# record has a delta but no spec: nothing is committed yet). One call per batch: the per-command
# cost of a pipeline dominated the per-task cost, and Redis fsyncs once for the whole call.
WRITE_IF_NEWER = FENCE_CHECK + """
local tombstone = tonumber(ARGV[1])
local held_after = {}
for i = 1, (#KEYS - 1) / 2 do
  local key = KEYS[2 * i]
  local version = tonumber(ARGV[4 * i - 1])
  local kind = ARGV[4 * i]
  local held = tonumber(redis.call('HGET', key, 'v'))
  if held and held >= version then
    if kind == 's' and held < tombstone then
      redis.call('HSETNX', key, 's', ARGV[4 * i + 1])
    end
    held_after[i] = held
  else
    if kind == 's' then
      redis.call('HSET', key, 'v', version, 's', ARGV[4 * i + 1])
      if held then
        redis.call('HDEL', key, 'd')
      end
    else
      redis.call('HSET', key, 'v', version, 'd', ARGV[4 * i + 1])
    end
    if not held then  -- (a record that exists is indexed already)
      redis.call('SADD', KEYS[2 * i + 1], ARGV[4 * i + 2])
    end
    held_after[i] = version
  end
  -- Whether a replay could run what is held: a whole spec just written can, a delta needs one.
  if held_after[i] < tombstone and not (kind == 's' and held_after[i] == version)
     and redis.call('HEXISTS', key, 's') == 0 then
    held_after[i] = -1  -- a delta without its spec: nothing a replay could run is committed yet
  end
end
return held_after
"""


# KEYS = fence; ARGV = epoch: from now on writes of earlier epochs of the fence's slot are refused.
RAISE_FENCE = """
local fence = tonumber(redis.call('GET', KEYS[1]))
if not fence or fence < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
end
return 0
"""

# KEYS = fence, checkpoint pointer (both in the writer's group); ARGV = seq, epoch, path.
SET_CHECKPOINT = FENCE_CHECK + """
redis.call('HSET', KEYS[2], 'seq', ARGV[1], 'path', ARGV[3], 'announced', ARGV[4])
return 0
"""

# KEYS = fence, the actor's checkpoint pointer; ARGV = seq, writer epoch: checkpoint seq has been
# announced to every process (which may drop what only a replay from an earlier one needs).
SET_ANNOUNCED = FENCE_CHECK + """
redis.call('HSET', KEYS[2], 'announced', ARGV[1])
return 0
"""

# Deletes the records of ARGV[1..n] (KEYS[2..n+1], in the group of the receiver index KEYS[1]) and
# their index entries, leaving tombstones; ARGV[n+1], ARGV[n+2]: tombstone version, TTL. A tombstone
# goes where no record is yet too: a write of the task still on its way (queued behind a group
# commit when the checkpoint that covers it was taken) must land on it, not bring the record back.
FORGET = """
local n = #KEYS - 1
for i = 1, n do
  redis.call('SREM', KEYS[1], ARGV[i])
  redis.call('DEL', KEYS[i + 1])
  redis.call('HSET', KEYS[i + 1], 'v', ARGV[n + 1])
  redis.call('EXPIRE', KEYS[i + 1], ARGV[n + 2])
end
return 0
"""

# KEYS = records; returns their spec and delta fields, flat: s_1, d_1, s_2, d_2, ... (nil where a
# field is absent). One command for many records: a pipeline of HMGETs cost the client ~15 µs a
# record to pack and parse, which made reading a lost actor's lineage most of a recovery's setup.
READ_RECORDS = """
local out = {}
for i, key in ipairs(KEYS) do
  local fields = redis.call('HMGET', key, 's', 'd')
  out[2 * i - 1] = fields[1]
  out[2 * i] = fields[2]
end
return out
"""
