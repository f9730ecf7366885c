"""The Lua scripts a cluster's worker writes a session with (pure strings, no I/O).

They implement the fencing of ``protocol/cluster/records.py`` rule 7. Taking a session (a first
claim, or a move from a dead worker) runs ``TAKE_SCRIPT``, which increments the session
record's ``epoch``; the new value is the taking worker's token. Every later write for the
session is one of the other scripts, each of which first compares the record's epoch with the
caller's token (both decimal strings, as ``is_current`` compares them) and writes nothing at
all unless they are equal: it then returns 0, "fenced". So once another worker took the
session, a worker that was paused (or cut off) can no longer store an event, change the
record or record a push, whatever it still believes.

What each script guarantees:

* ``TAKE_SCRIPT``: the epoch grows by exactly one per take, atomically; a session without a
  record is never created (-1).
* ``STORE_SCRIPT``: a batch of events is appended in one round trip, each with its seq as the
  entry id, so an event already stored is refused by Redis and skipped (rule 2: storing twice
  is harmless); each entry carries the token that stored it; the record's fields (its last
  seq, usage) change in the same script (no other client's command runs in between).
* ``RECORD_SCRIPT``: the record's fields change, and the accepted pushes are cleared, only
  for the current token.
* ``PUSH_SCRIPT``: an accepted push is recorded (to be delivered again after a move) only for
  the current token.
* ``ENQUEUE_SCRIPT`` (a gateway's ``open`` or ``continue`` with an idempotency key): the key's
  claim, the session record, its place in the index and its job are written together or not
  at all, and only when the key is new; a key already claimed returns its claim (the session
  it created) and writes nothing, so no retry of the request, on any gateway, runs it twice.

Each script but ``ENQUEUE_SCRIPT`` touches only keys tagged ``{sid}`` (one hash slot: they run
on Redis Cluster too); ``ENQUEUE_SCRIPT`` also writes the index and the jobs stream, so it needs
one Redis (on Redis Cluster those keys would have to share the key's slot).
The worker registers them (``actors/cluster/worker.py``); their KEYS and ARGV are in each
constant's docstring.
"""

from __future__ import annotations

__all__ = ["ENQUEUE_SCRIPT", "PUSH_SCRIPT", "RECORD_SCRIPT", "STORE_SCRIPT", "TAKE_SCRIPT"]

TAKE_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
return redis.call('HINCRBY', KEYS[1], 'epoch', 1)
"""
"""KEYS: record. The new token (-1: no such session); the record names the new owner with
the first write that token allows (``live``, or the move)."""

STORE_SCRIPT = """
if redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[1] then return 0 end
local n = tonumber(ARGV[3])
for i = 0, n - 1 do
  local r = redis.pcall('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], ARGV[4 + 2 * i],
                        'e', ARGV[5 + 2 * i], 't', ARGV[1])
  if type(r) == 'table' and r.err and not string.find(r.err, 'equal or smaller', 1, true) then
    return redis.error_reply(r.err)
  end
end
local rest = 4 + 2 * n
if #ARGV >= rest then redis.call('HSET', KEYS[1], unpack(ARGV, rest)) end
return 1
"""
"""KEYS: record, events; ARGV: token, maxlen, n, n x (entry id, event), then record fields.
An event already stored (its id not above the last) is skipped (rule 2); each entry also
carries the token that stored it (``t``)."""

RECORD_SCRIPT = """
if redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[1] then return 0 end
if ARGV[2] == '1' then redis.call('DEL', KEYS[2]) end
if #ARGV >= 3 then redis.call('HSET', KEYS[1], unpack(ARGV, 3)) end
return 1
"""
"""KEYS: record, pushes; ARGV: token, "1" to clear the pushes, then record fields."""

PUSH_SCRIPT = """
if redis.call('HGET', KEYS[1], 'epoch') ~= ARGV[1] then return 0 end
redis.call('RPUSH', KEYS[2], ARGV[2])
return 1
"""
"""KEYS: record, pushes; ARGV: token, the accepted push."""

ENQUEUE_SCRIPT = """
local claim = redis.call('GET', KEYS[1])
if claim then return {0, claim} end
if ARGV[5] == '' then
  if redis.call('EXISTS', KEYS[2]) == 1 then return {-1, ''} end
elseif redis.call('HGET', KEYS[2], 'state') ~= 'ended'
    or redis.call('HGET', KEYS[2], 'executions') ~= ARGV[5] then
  return {-1, ''}
end
local n = tonumber(ARGV[6])
redis.call('HSET', KEYS[2], unpack(ARGV, 7, 6 + 2 * n))
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4])
redis.call('XADD', KEYS[4], '*', unpack(ARGV, 7 + 2 * n))
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, ARGV[1]}
"""
"""KEYS: idempotency key, record, sessions index, jobs; ARGV: the claim to store, its time to
live (ms), the index score, the session id, the executions the record must have ended
(``''``: an open, the record must not exist), n, n x (record field, value), then the job's
fields. Returns ``{1, claim}`` (written), ``{0, claim}`` (the key's earlier claim, nothing
written) or ``{-1, ''}`` (the session changed meanwhile: nothing written)."""
