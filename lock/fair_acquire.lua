-- fair_acquire: take the fair lock when it is free and nobody waits, else (mode 'wait') join the queue.
--
-- KEYS as in prelude.lua: lease, fence, queue, waiter key prefix.
-- ARGV[1]  owner token (32 hex characters)
-- ARGV[2]  lease TTL in whole milliseconds (>= 1)
-- ARGV[3]  mode: 'try' (never queue; takes the lease back from a grantee that died before reading its
--          grant, see fair_revoke), 'wait' (queue when busy), 'requeue' (as wait, after removing an
--          earlier entry and keys of this owner: a waiter whose slice ended before it renewed it)
-- ARGV[4]  wait slice in ms (>= 1): the life of the waiter's key, renewed by fair_refresh
--
-- Returns (luakit's reply convention):
--   token         acquired (as acquire.lua's: an integer below 2^53, else a decimal string)
--   {0, pttl}     mode 'try', busy: the lease is held (pttl its remaining life, -1 without expiry) or
--                 free with waiters queued (pttl -2), who are served first
--   {0, 'queued'} mode 'wait'/'requeue', queued: the waiter pops its grant from its grant list (the grant
--                 may already be there: a free lease with a queue is granted to the queue's head at
--                 once, which may be this waiter)
--   {-4, reason}  the counter cannot issue a token (acquire.lua's reasons); nothing written
--
-- A free lease with waiters queued happens when a holder's lease expired instead of being released,
-- or when a plain lock released it (the fair lock and the plain lock share the lease and fence keys):
-- any attempt then grants it to the queue's first live waiter, so the queue moves on without waiting
-- for a release. Commands when free and nobody waits: EXISTS (of the lease and the queue), SET, INCR,
-- PTTL; when held and queueing: EXISTS, RPUSH, SET.
luakit_acl({'del', KEYS[1]}, {'incr', KEYS[2]}, {'pttl', KEYS[2]}, {'get', KEYS[2]}, {'set', KEYS[2]}, {'rpush', KEYS[3]}, {'lpop', KEYS[3]}, {'lpush', KEYS[3]}, {'lrem', KEYS[3]}, {'lpush', KEYS[4]}, {'pexpire', KEYS[4]}, {'del', KEYS[4]}, {'set', KEYS[4]}, {'set', KEYS[1]})

local n = redis.call('EXISTS', KEYS[1], KEYS[3])
if n == 0 then
  local token, refusal = fair_take(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
  return token or refusal
end

if ARGV[3] == 'try' then
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl >= 0 and fair_revoke(KEYS[1], KEYS[2], KEYS[3], KEYS[4]) then
    pttl = redis.call('PTTL', KEYS[1])
  end
  if pttl == -2 then
    -- free, with waiters queued: grant to the first live one
    local ok, reason = fair_grant(KEYS[1], KEYS[2], KEYS[3], KEYS[4])
    if not ok and type(reason) == 'table' then
      return reason
    end
    if redis.call('EXISTS', KEYS[1]) == 0 then
      -- every queued waiter was dead: the lock is free for this attempt
      local token, refusal = fair_take(KEYS[1], KEYS[2], ARGV[1], ARGV[2])
      return token or refusal
    end
  end
  return {0, pttl}
end

if ARGV[3] == 'requeue' then
  redis.call('LREM', KEYS[3], 0, ARGV[1] .. ':' .. ARGV[2] .. ':' .. ARGV[4])
  redis.call('DEL', KEYS[4] .. ARGV[1], KEYS[4] .. ARGV[1] .. ':grant')
end
local len = fair_enqueue(KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[4])
-- n counted the lease and the queue: when one of them exists and the queue was not empty before this
-- entry (len > 1), the lease is free. A requeued entry may have been the queue's only one: look.
local free = n == 1 and len > 1
if ARGV[3] == 'requeue' then
  free = redis.call('EXISTS', KEYS[1]) == 0
end
if free then
  -- free, with waiters queued before this one (a holder's lease expired, or a plain lock deleted it)
  local ok, reason = fair_grant(KEYS[1], KEYS[2], KEYS[3], KEYS[4])
  if not ok then
    return fair_counter_reply(reason)
  end
end
return {0, 'queued'}
