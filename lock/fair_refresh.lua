-- fair_refresh: a queued waiter's renewal at the end of each wait slice.
--
-- KEYS as in prelude.lua: lease, fence, queue, waiter key prefix.
-- ARGV[1]  owner token
-- ARGV[2]  wait slice in ms (>= 1)
--
-- Returns (luakit's reply convention):
--   {0}           still queued and not granted: the waiter's key expires a slice from now, and a grant
--                 can only come after this script ran (or was just pushed onto its grant list)
--   {1, token}    granted: the lease holds this owner; token is the grant's (from the waiter's grant
--                 list, or the counter's value when the grant was popped and its reply lost: nobody
--                 can issue a token while the lease is held); the waiter's keys are deleted, so the
--                 grant counts as read
--   {-4, reason}  the counter cannot issue a token (acquire.lua's reasons): the lease is free and
--                 the waiters cannot be served
--   {-1}          not queued: the waiter's key is gone (its slice ended before this renewal, so a
--                 release may have skipped it), or a grant reached it and the lease ended or was taken
--                 back before it was read; the waiter's keys are deleted and it must queue again
--                 (fair_acquire, mode 'requeue')
-- Before that, a free lease is granted to the queue's first live waiter (a holder's lease expired, or a
-- plain lock deleted it), and a lease held by a grantee that died before reading its grant is taken
-- back and granted on (fair_revoke), so such a waiter delays the queue by at most its slice.
-- Commands while queued: LINDEX, GET, then fair_revoke's (LINDEX, PTTL of the holder's grant) and
-- PEXPIRE.
-- ACL: the writes of fair_revoke and fair_grant, checked before anything is written.
luakit_acl({'del', KEYS[4]}, {'del', KEYS[1]}, {'lpop', KEYS[3]}, {'lpush', KEYS[3]}, {'set', KEYS[1]}, {'incr', KEYS[2]}, {'pttl', KEYS[2]}, {'get', KEYS[2]}, {'set', KEYS[2]}, {'lpush', KEYS[4]}, {'pexpire', KEYS[4]})

local w = KEYS[4] .. ARGV[1]
local g = w .. ':grant'
-- the grant '<token>:<slice>' (a waiter's cancel marker is no grant)
local head = redis.call('LINDEX', g, 0)
local grant = head and string.match(head, '^(%d+):')
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('DEL', w, g)
  if grant then
    return {1, grant}
  end
  return {1, redis.call('GET', KEYS[2])}
end
if grant then
  redis.call('DEL', w, g)
  return {-1}
end
if holder then
  fair_revoke(KEYS[1], KEYS[2], KEYS[3], KEYS[4])
else
  -- free with waiters queued (a holder's lease expired, or a plain lock released it): grant it on
  local ok, reason = fair_grant(KEYS[1], KEYS[2], KEYS[3], KEYS[4])
  if not ok then
    return fair_counter_reply(reason)
  end
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  -- granted to this waiter just now: it pops the grant from its grant list
  return {0}
end
if redis.call('PEXPIRE', w, ARGV[2]) == 1 then
  return {0}
end
return {-1}
