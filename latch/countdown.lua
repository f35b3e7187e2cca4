-- countdown: decrement the count of one generation by one, publishing when it reaches zero.
--
-- KEYS[1]  latch key: a hash {gen, count, initial, expires[, aborted][, prevdone]}
-- ARGV[1]  the caller's generation id
--
-- Returns a status row (luakit's reply convention), one of:
--   {1, remaining}   ok: decremented; remaining is the new count as a decimal string (exact int64)
--   and, nothing written, latch_live's rows (latch's prelude):
--   {-1, now}        absent: no latch at the key (deleted or expired); now is the server time in Unix ms
--   {-2}             not owner: the key holds another generation (replaced)
--   {-3, reason}     foreign: the key holds something that is not a latch (another type, a hash without
--                    gen, or a count that is not a canonical decimal int64 >= 0)
--   {-6, reason}     aborted: the generation was aborted (with reason)
--   {-7}             completed: the count was already zero
--
-- Publishes 'zero' on the sharded channel named like the key when the count reaches zero. O(1).
-- ACL: TYPE, TIME, HMGET, HINCRBY, HGET and SPUBLISH. luakit_acl (below) checks, before anything else,
-- every command this script may run after its first write (the HINCRBY): a user the ACL refuses one of
-- them gets NOPERM and nothing is written. A refused TYPE, TIME, HMGET or HINCRBY would fail before
-- any write (the server's NOPERM error), so they are not checked: each check costs server time on
-- every call.
luakit_acl({'hget', KEYS[1]}, {'spublish', KEYS[1], ''})
local refused = latch_live(KEYS[1], ARGV[1])
if refused then
  return refused
end
redis.call('HINCRBY', KEYS[1], 'count', -1)
local remaining = redis.call('HGET', KEYS[1], 'count')
if remaining == '0' then
  redis.call('SPUBLISH', KEYS[1], 'zero')
end
return {1, remaining}
