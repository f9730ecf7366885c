"""The Lua scripts of the governor a cluster's nodes share (pure text, no I/O).

Each decision of the shared governor (``actors/cluster/governor.py``) is one script, so it is
atomic across the nodes. Every script takes the same keys, all of one hash tag (one slot on a
Redis Cluster), in this order:

``KEYS[1]`` the state hash (``limit``, ``successes``, ``last_decrease``, ``paused_until``,
``rejections``, ``starts``), ``KEYS[2]`` the leases (a sorted set: lease id -> expiry),
``KEYS[3]`` the budgets spent (a hash: ``fleet``, ``principal:<name>``, ``label:<name>`` ->
US dollars), ``KEYS[4]`` the nodes (a sorted set: node -> expiry), ``KEYS[5]`` their caps (a
hash: node -> its ``max_live``), ``KEYS[6]`` the *freed* stream (an entry each time room is
made under the limit: leases dropped or lapsed, the limit raised; the nodes whose opens wait
for the limit read it, blocking, to ask again at once), ``KEYS[7]`` the nodes' waiting heads
(a hash: node -> ``priority|since``, the open it would start next, its priority and since
when it waits, in the server's clock); ``TURN_SCRIPT`` also takes ``KEYS[8]``, its report's
``seen`` marker.

**Fair order across the nodes.** Each node keeps its own waiting opens in the order of the
rules (priority, then its owners in turn), and tells ``ACQUIRE_SCRIPT`` its head's priority and
how long it has waited. A node yields a free place to the other live nodes whose heads go
first (a higher priority, or the same one waiting longer), one place for each: its start is
answered ``yielded`` while the places left are no more than the nodes ahead of it. So the
open that has waited longest at the highest priority starts first, whichever node it waits
on. A node with nothing waiting for the cluster drops its head (``LEASES_SCRIPT``); a head of a
node whose registration lapsed (a dead node) is dropped by the next start that reads it.

Times are the Redis server's clock (``TIME``, seconds), so nodes whose clocks differ agree;
every script returns the server's ``now`` first, as a string (Lua numbers come back as
integers otherwise), and a node converts the times it gets to its own clock by the
difference.

The first four arguments of every script are the node (``ARGV[1]``), its ``max_live``
(``ARGV[2]``), how long its registration lasts (``ARGV[3]``, seconds) and the first limit
(``ARGV[4]``). The shared limit never passes the sum of the registered nodes' ``max_live``
(their caps) and never drops below one.
"""

from __future__ import annotations

__all__ = [
    "ACQUIRE_SCRIPT",
    "FIGURES_SCRIPT",
    "LEASES_SCRIPT",
    "REJECT_SCRIPT",
    "TURN_SCRIPT",
]

_PRELUDE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local function register()
  local gone = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)
  for _, node in ipairs(gone) do redis.call('HDEL', KEYS[5], node) end
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
  redis.call('ZADD', KEYS[4], now + tonumber(ARGV[3]), ARGV[1])
  redis.call('HSET', KEYS[5], ARGV[1], ARGV[2])
  local cap = 0
  for _, v in ipairs(redis.call('HVALS', KEYS[5])) do cap = cap + tonumber(v) end
  return math.max(1, cap)
end
local function limit_of(cap)
  local limit = tonumber(redis.call('HGET', KEYS[1], 'limit') or ARGV[4])
  return math.max(1, math.min(limit, cap))
end
local function paused_until()
  return tonumber(redis.call('HGET', KEYS[1], 'paused_until') or '0')
end
local function freed(count)
  if count > 0 then
    redis.call('XADD', KEYS[6], 'MAXLEN', '~', '64', '*', 'freed', tostring(count))
  end
end
"""

ACQUIRE_SCRIPT = (
    _PRELUDE
    + """
-- A start (rules 1, 2, 4, 5 across the nodes): ARGV[5] the lease, ARGV[6] its lifetime,
-- ARGV[7] the open's priority, ARGV[8] the seconds it has waited, then pairs (field of
-- KEYS[3], budget). Returns {status, now, a, b}: ok (count, limit), paused (until),
-- exhausted (field, spent), full (count, limit), yielded (count, limit: the places left
-- are kept for the heads of other nodes that go first).
local cap = register()
freed(redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now))
local priority = tonumber(ARGV[7])
local since = now - tonumber(ARGV[8])
redis.call('HSET', KEYS[7], ARGV[1], ARGV[7] .. '|' .. tostring(since))
local paused = paused_until()
if paused > now then
  return {'paused', tostring(now), tostring(paused), ''}
end
for i = 9, #ARGV, 2 do
  local spent = tonumber(redis.call('HGET', KEYS[3], ARGV[i]) or '0')
  if spent >= tonumber(ARGV[i + 1]) then
    redis.call('HDEL', KEYS[7], ARGV[1])
    return {'exhausted', tostring(now), ARGV[i], tostring(spent)}
  end
end
local limit = limit_of(cap)
local count = redis.call('ZCARD', KEYS[2])
if count >= limit then
  return {'full', tostring(now), tostring(count), tostring(limit)}
end
local ahead = 0
local heads = redis.call('HGETALL', KEYS[7])
for i = 1, #heads, 2 do
  local node = heads[i]
  if node ~= ARGV[1] then
    if not redis.call('ZSCORE', KEYS[4], node) then
      redis.call('HDEL', KEYS[7], node)
    else
      local p, s = string.match(heads[i + 1], '^([^|]+)|(.+)$')
      p, s = tonumber(p), tonumber(s)
      if p > priority or (p == priority and s < since) then ahead = ahead + 1 end
    end
  end
end
if count + ahead >= limit then
  return {'yielded', tostring(now), tostring(count), tostring(limit)}
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[6]), ARGV[5])
redis.call('HINCRBY', KEYS[1], 'starts', 1)
redis.call('HDEL', KEYS[7], ARGV[1])
return {'ok', tostring(now), tostring(count + 1), tostring(limit)}
"""
)

REJECT_SCRIPT = (
    _PRELUDE
    + """
-- A rejection (rules 1, 2): ARGV[5] the pause in seconds from now, ARGV[6] the decrease
-- factor, ARGV[7] the decrease interval. The pause only grows; the limit is lowered at most
-- once per interval across the nodes. Returns {now, paused_until, old limit, new limit}.
local cap = register()
local paused = paused_until()
local wanted = now + tonumber(ARGV[5])
if wanted > paused then
  paused = wanted
  redis.call('HSET', KEYS[1], 'paused_until', tostring(paused))
end
redis.call('HINCRBY', KEYS[1], 'rejections', 1)
local old = limit_of(cap)
local new = old
local last = tonumber(redis.call('HGET', KEYS[1], 'last_decrease') or '-1')
if last < 0 or now - last >= tonumber(ARGV[7]) then
  new = math.max(1, math.floor(old * tonumber(ARGV[6])))
  redis.call('HSET', KEYS[1], 'last_decrease', tostring(now), 'successes', 0, 'limit', new)
end
return {tostring(now), tostring(paused), tostring(old), tostring(new)}
"""
)

TURN_SCRIPT = (
    _PRELUDE
    + """
-- A turn ended (rules 1, 4): ARGV[5] its cost, ARGV[6] 1 when it succeeded, ARGV[7]
-- increase_after, ARGV[8] how long its seen marker lasts, ARGV[9] the limit its execution
-- was admitted under, then the fields of KEYS[3] it is spent on. Applied once per report
-- (KEYS[8]): a report sent again after a lost reply is not counted twice. Returns {now,
-- old limit, new limit, applied (1/0)}.
local cap = register()
local old = limit_of(cap)
if not redis.call('SET', KEYS[8], '1', 'NX', 'EX', tonumber(ARGV[8])) then
  return {tostring(now), tostring(old), tostring(old), '0'}
end
for i = 10, #ARGV do
  redis.call('HINCRBYFLOAT', KEYS[3], ARGV[i], ARGV[5])
end
local new = old
if ARGV[6] == '1' then
  -- A success is evidence for the limit its turn was admitted under (ARGV[9]): in slow start
  -- (until the first rejection) it raises the limit while that is below one and a half times
  -- it; then one more per increase_after successes admitted under the current limit.
  local under = tonumber(ARGV[9])
  local rejections = tonumber(redis.call('HGET', KEYS[1], 'rejections') or '0')
  local raise = false
  if rejections == 0 then
    raise = old < under + math.max(1, math.floor(under / 2))
  elseif under >= old then
    local successes = redis.call('HINCRBY', KEYS[1], 'successes', 1)
    raise = successes >= tonumber(ARGV[7])
  end
  if raise then
    redis.call('HSET', KEYS[1], 'successes', 0)
    if old < cap then
      new = old + 1
      redis.call('HSET', KEYS[1], 'limit', new)
      freed(1)
    end
  end
end
return {tostring(now), tostring(old), tostring(new), '1'}
"""
)

LEASES_SCRIPT = (
    _PRELUDE
    + """
-- A node's leases and the figures (rules 1, 5, 7): ARGV[5] a lease's lifetime, ARGV[6] 1
-- when opens wait on the node for the cluster (0: its waiting head is dropped), ARGV[7] how
-- many leases follow to renew (its counted executions), then those, then the leases to
-- drop (ended executions, and those waiting for a person). Expired leases (a node that
-- died) are dropped. Returns {now, count, limit, paused_until, rejections, starts, cap,
-- field, spent, field, spent, ...}.
local cap = register()
if ARGV[6] ~= '1' then redis.call('HDEL', KEYS[7], ARGV[1]) end
local renew = tonumber(ARGV[7])
for i = 8, 7 + renew do
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[5]), ARGV[i])
end
local dropped = 0
for i = 8 + renew, #ARGV do
  dropped = dropped + redis.call('ZREM', KEYS[2], ARGV[i])
end
freed(dropped + redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now))
local out = {
  tostring(now), tostring(redis.call('ZCARD', KEYS[2])), tostring(limit_of(cap)),
  tostring(paused_until()), redis.call('HGET', KEYS[1], 'rejections') or '0',
  redis.call('HGET', KEYS[1], 'starts') or '0', tostring(cap)
}
for _, v in ipairs(redis.call('HGETALL', KEYS[3])) do table.insert(out, v) end
return out
"""
)

FIGURES_SCRIPT = """
-- The shared figures, read only (a gateway's hello): {now, count, cap, limit or '',
-- paused_until, rejections, starts, fleet spent}; the leases and nodes not expired.
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local cap = 0
for _, node in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '(' .. now, '+inf')) do
  cap = cap + tonumber(redis.call('HGET', KEYS[5], node) or '0')
end
return {
  tostring(now), tostring(redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf')), tostring(cap),
  redis.call('HGET', KEYS[1], 'limit') or '', redis.call('HGET', KEYS[1], 'paused_until') or '0',
  redis.call('HGET', KEYS[1], 'rejections') or '0', redis.call('HGET', KEYS[1], 'starts') or '0',
  redis.call('HGET', KEYS[3], 'fleet') or '0'
}
"""
