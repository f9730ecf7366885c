"""The Lua scripts a cluster writes and reads a session with, and how the read script's reply is
taken (pure: no I/O).

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
  record is never created (-1); the record keeps which job entry started the execution
  (``job``: ``"<execution> <entry id>"``), and a second copy of that execution's job, or a
  job of an execution the record is past, is refused (-2: acknowledge it, run nothing).
* ``STORE_SCRIPT``: a batch of events is appended in one round trip, as entries of
  consecutive events whose id is the seq of their last (rule 2); an event already stored is
  skipped (storing twice is harmless); each entry carries the token that stored it; the
  record's fields (its last seq, usage) change in the same script (no other client's command
  runs in between).
* ``READ_SCRIPT`` (a gateway's follower, ``actors/cluster/follower.py``; it writes nothing): a
  run of stored events read as one string, stopping before the first entry that does not hold
  the next seq or is not of the store script's shape.
* ``RECORD_SCRIPT``: the record's fields change, and the accepted pushes are cleared, only
  for the current token.
* ``PUSH_SCRIPT``: an accepted push is recorded (to be delivered again after a move) only for
  the current token.
* ``CLAIM_SCRIPT``, ``PENDING_SCRIPT``, ``APPENDED_SCRIPT``, ``UNCLAIM_SCRIPT`` (a gateway's
  ``open`` or ``continue`` with an idempotency key; ``actors/cluster/fleet.py``): the key's
  claim lives in the key's own hash slot, the session record in the session's, the jobs
  stream and the index in theirs, so no one script can write them all on Redis Cluster.
  Instead: (1) ``CLAIM_SCRIPT`` records the key (only when new; otherwise it returns the
  earlier claim); (2) ``PENDING_SCRIPT`` writes the record together with the job it waits for
  (``pending_job``), only when the session is as the request expects; (3) the gateway adds the
  session to the index and appends the job; (4) ``APPENDED_SCRIPT`` clears ``pending_job``.
  The recovery rule: a retry that finds the claim runs (2)-(4) again for the claimed session;
  (2) writes nothing when the record is there already and returns its ``pending_job`` when
  the job may not have been appended, which the retry appends. A job can so be appended
  twice (a gateway dies between (3) and (4), or two retries race), never lost; the workers
  run one of the copies: ``TAKE_SCRIPT`` refuses a job of an execution whose other job was
  taken already, or of an execution the session is past.

Their callers register them (a worker's ``actors/cluster/writes.py``, a gateway's
``enqueue.py`` and ``follower.py``); their KEYS and ARGV are in each constant's docstring.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from claude_trio.protocol.errors import RemoteProtocolError

__all__ = [
    "APPENDED_SCRIPT",
    "CLAIM_SCRIPT",
    "PENDING_SCRIPT",
    "PUSH_SCRIPT",
    "READ_SCRIPT",
    "RECORD_SCRIPT",
    "STORE_SCRIPT",
    "TAKE_SCRIPT",
    "UNCLAIM_SCRIPT",
    "read_run",
]

TAKE_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if #ARGV >= 2 then
  local at = tonumber(redis.call('HGET', KEYS[1], 'executions') or '1')
  if tonumber(ARGV[1]) < at then return -2 end
  local started = redis.call('HGET', KEYS[1], 'job')
  local mine = ARGV[1] .. ' ' .. ARGV[2]
  if started and started ~= mine and string.match(started, '^(%d+) ') == ARGV[1] then
    return -2
  end
  redis.call('HSET', KEYS[1], 'job', mine)
end
return redis.call('HINCRBY', KEYS[1], 'epoch', 1)
"""
"""KEYS: record; ARGV: the job's execution and entry id. The new token (-1: no such
session; -2: a copy of a job another entry started, or of an execution the session is
past); the record names the new owner with the first write that token allows (``live``, or
the move)."""

STORE_SCRIPT = """
local function first_of(entry)  -- the seq of an entry's first event
  local f = entry[2]
  if f[5] == 's' then return tonumber(f[6]) end
  return tonumber(string.match(entry[1], '^(%d+)'))
end
local head = redis.call('HMGET', KEYS[1], 'epoch', 'stored', 'oldest')
if head[1] ~= ARGV[1] then return 0 end
local stored, oldest = tonumber(head[2]), head[3]
if not stored then
  local top = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)[1]
  stored = top and tonumber(string.match(top[1], '^(%d+)')) or 0
end
local empty = stored == 0
local keep = tonumber(ARGV[2])
local ids, counts, texts = ARGV[4], ARGV[5], ARGV[6]
local i, c, j = 1, 1, 1
for _ = 1, tonumber(ARGV[3]) do
  local id_end = (string.find(ids, '\\n', i, true) or (#ids + 1)) - 1
  local count_end = (string.find(counts, '\\n', c, true) or (#counts + 1)) - 1
  local last = tonumber(string.sub(ids, i, id_end))
  local first = last - tonumber(string.sub(counts, c, count_end)) + 1
  local text_end = j
  for _ = first, last do
    text_end = (string.find(texts, '\\n', text_end, true) or (#texts + 1)) + 1
  end
  if last > stored then
    local text, from = string.sub(texts, j, text_end - 2), j
    if stored >= first then  -- its head is stored already: only the rest
      for _ = first, stored do from = string.find(texts, '\\n', from, true) + 1 end
      text, first = string.sub(texts, from, text_end - 2), stored + 1
    end
    local add = {'XADD', KEYS[2], last .. '-0', 'e', text, 't', ARGV[1]}
    if first < last then add[8], add[9] = 's', first end
    if empty and not oldest then oldest = first end
    local r = redis.pcall(unpack(add))
    stored = last
    if type(r) == 'table' and r.err then  -- the stream is past what the record says
      if not string.find(r.err, 'equal or smaller', 1, true) then
        return redis.error_reply(r.err)
      end
      local top = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)[1]
      stored = math.max(last, tonumber(string.match(top[1], '^(%d+)')))
    end
  end
  i, c, j = id_end + 2, count_end + 2, text_end
end
if stored > keep and redis.call('XTRIM', KEYS[2], 'MINID', '~', stored - keep + 1) > 0 then
  oldest = first_of(redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)[1])
end
local set = {'HSET', KEYS[1], 'stored', stored}
if oldest then set[5], set[6] = 'oldest', oldest end
for k = 7, #ARGV do set[#set + 1] = ARGV[k] end
redis.call(unpack(set))
return 1
"""
"""KEYS: record, events; ARGV: token, the events kept (``stream_max``), n, the n entries' ids
(the seq of each one's last event) and the n entries' event counts, each joined by newlines,
then every event's text joined by newlines (an event's JSON text has none), then record
fields. Events already stored (their seq not above the record's ``stored``, the stream's last
seq, which the script keeps) are skipped (rule 2), also at the head of an entry stored only in
part; each entry also carries the token that stored it (``t``) and, holding several events,
the first one's seq (``s``). The stream keeps the entries of its last ``stream_max`` seqs
(``MINID ~``), and the record its oldest seq (``oldest``: set by the first store into an
empty stream and after each trim; a stream written before the record kept it has none until
its first trim). Batched arguments rather than several per event: a client packs each
argument of a command on its own, which for a burst's thousand events cost more than the
store itself."""

READ_SCRIPT = """
local after, count = tonumber(ARGV[1]), tonumber(ARGV[2])
local entries = redis.call('XRANGE', KEYS[1], (after + 1) .. '-0', '+', 'COUNT', count)
local function past(text, from, n)  -- the position after the next n newlines (nil: fewer)
  for _ = 1, n do
    local at = string.find(text, '\\n', from, true)
    if not at then return nil end
    from = at + 1
  end
  return from
end
local texts, at, other = {}, after, 0
for _, entry in ipairs(entries) do
  if at - after >= count then break end
  local f = entry[2]
  local last = tonumber(string.match(entry[1], '^(%d+)-0$'))
  local first = last
  if #f == 6 and f[5] == 's' then first = tonumber(f[6]) end
  if f[1] ~= 'e' or f[3] ~= 't' or not (#f == 4 or f[5] == 's') or not (first and last)
      or first > at + 1 or last <= at then
    other = 1
    break
  end
  local text, upto = f[2], math.min(last, after + count)
  local from = past(text, 1, math.max(0, at - first + 1))
  local to = from and past(text, from, upto - math.max(first, at + 1))  -- the last one taken
  if to then
    local ends = string.find(text, '\\n', to, true)
    if upto == last then to = not ends and #text + 2 else to = ends and ends + 1 end
  end
  if not to then
    other = 1
    break
  end
  texts[#texts + 1] = string.sub(text, from, to - 2)
  at = upto
end
return {at - after, other, table.concat(texts, '\\n')}
"""
"""KEYS: events; ARGV: a seq, a count. The stored events after that seq (at most count) as
``{n, other, texts}``: ``texts`` are the texts of the ``n`` events of the seqs after it, in
order, joined by newlines (the head of the first entry, up to that seq, left out); ``other``
is 1 when an entry that breaks that run came next (a gap, another shape: read it with
``XREAD``). One string for a batch: a reply of one element per field costs a gateway more to
parse than the rest of reading a delta."""


def read_run(reply: Sequence[Any]) -> tuple[list[str], bool]:
    """``READ_SCRIPT``'s reply as the texts of its run of events, and whether an entry that
    broke the run came after them (read it with ``XREAD``)."""
    n, other, joined = int(reply[0]), int(reply[1]), str(reply[2])
    texts = joined.split("\n") if n else []
    if len(texts) != n:
        raise RemoteProtocolError(f"the stream read gave {len(texts)} event texts for {n} events")
    return texts, other == 1


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

CLAIM_SCRIPT = """
local claim = redis.call('GET', KEYS[1])
if claim then return {0, claim} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, ARGV[1]}
"""
"""KEYS: idempotency key; ARGV: the claim, its time to live (ms). ``{1, claim}`` (the key
was new: claimed now) or ``{0, the earlier claim}`` (nothing written)."""

UNCLAIM_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
"""
"""KEYS: idempotency key; ARGV: the claim. Forgets the claim if it is still this one (the
request it was made for wrote nothing: the session had changed)."""

PENDING_SCRIPT = """
local pending = redis.call('HGET', KEYS[1], 'pending_job')
if pending then return {2, pending} end
if ARGV[1] == '' then
  if redis.call('EXISTS', KEYS[1]) == 1 then return {0, ''} end
elseif redis.call('HGET', KEYS[1], 'state') ~= 'ended'
    or redis.call('HGET', KEYS[1], 'executions') ~= ARGV[1] then
  return {0, ''}
end
local n = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'pending_job', ARGV[2], unpack(ARGV, 4, 3 + 2 * n))
return {1, ARGV[2]}
"""
"""KEYS: record; ARGV: the executions the record must have ended (``''``: an open, the
record must not exist), the pending job (JSON), n, n x (record field, value). ``{1, job}``
(written now), ``{2, the job}`` (written before, its job perhaps not appended: append it)
or ``{0, ''}`` (the record is not as expected: nothing written)."""

APPENDED_SCRIPT = """
if redis.call('HGET', KEYS[1], 'pending_job') == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'pending_job')
end
return 1
"""
"""KEYS: record; ARGV: the pending job that was appended."""
