-- fair_refresh: a queued waiter's renewal at the end of each wait slice.
--
-- KEYS as in prelude.lua: lease, fence, queue, waiter key prefix.
-- ARGV[1]  owner token
-- ARGV[2]  wait slice in ms (>= 1)
--
-- Returns (luakit's reply convention):
--   {0}           still queued and not granted: the waiter's stream expires a slice from now, and a
--                 grant can only come after this script ran
--   {1, token}    granted: the lease holds this owner; token is the grant's (from the waiter's stream,
--                 or the counter's value when the stream is gone: nobody can issue a token while the
--                 lease is held)
--   {-1}          not queued: the waiter's stream is gone (its slice ended before this renewal, so a
--                 release may have skipped it), or a grant reached it and the lease ended before it was
--                 read; the stream is deleted and the waiter must queue again (fair_acquire, 'requeue')
-- PEXPIRE of the waiter's own stream is the only write besides that DEL; no ACL check is needed.
local w = KEYS[4] .. ARGV[1]
local last = redis.call('XREVRANGE', w, '+', '-', 'COUNT', 1)
local granted = last[1] and last[1][2][1] == 't'
if redis.call('GET', KEYS[1]) == ARGV[1] then
  if granted then
    return {1, last[1][2][2]}
  end
  return {1, redis.call('GET', KEYS[2])}
end
if not granted and redis.call('PEXPIRE', w, ARGV[2]) == 1 then
  return {0}
end
redis.call('DEL', w)
return {-1}
