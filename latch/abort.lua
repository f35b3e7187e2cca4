-- abort: fail one generation with a reason, kept in the hash so late waiters and joiners see it.
--
-- KEYS[1]  latch key: a hash {gen, count, initial, expires[, aborted][, prevdone]}
-- ARGV[1]  the caller's generation id
-- ARGV[2]  the reason (opaque bytes, may be empty)
--
-- Returns a status row (luakit's reply convention), one of:
--   {1}            ok: aborted now; the count is unchanged
--   and, nothing written, latch_live's rows (latch's prelude):
--   {-1, now}      absent: no latch at the key (deleted or expired); now is the server time in Unix ms
--   {-2}           not owner: the key holds another generation (replaced)
--   {-3, reason}   foreign: the key holds something that is not a latch (another type, a hash without
--                  gen, or a count that is not a canonical decimal int64 >= 0)
--   {-6, reason}   aborted: the generation was already aborted (with reason)
--   {-7}           completed: the count had already reached zero
--
-- Publishes 'abort' on the sharded channel named like the key. O(1).
-- ACL: TYPE, TIME, HMGET, HSET and SPUBLISH. luakit_acl (below) checks, before anything else, every
-- command this script may run after its first write (the HSET): a user the ACL refuses one of them
-- gets NOPERM and nothing is written. A refused TYPE, TIME, HMGET or HSET would fail before any write
-- (the server's NOPERM error), so they are not checked: each check costs server time on every call.
luakit_acl({'spublish', KEYS[1], ''})
local refused = latch_live(KEYS[1], ARGV[1])
if refused then
  return refused
end
redis.call('HSET', KEYS[1], 'aborted', ARGV[2])
redis.call('SPUBLISH', KEYS[1], 'abort')
return {1}
