-- delete: remove the latch when it still holds the caller's generation, waking its waiters.
--
-- KEYS[1]  latch key: a hash {gen, count, initial, expires[, aborted][, prevdone]}
-- ARGV[1]  the caller's generation id
--
-- Returns a status alone (luakit's reply convention): 1 the key was deleted; -1 it holds nothing; -2 it
-- holds another generation; -3 it holds something that is not a latch (another type, a hash without
-- gen, or a count that is not a canonical decimal int64 >= 0). Only 1 writes. Publishes 'delete' on the sharded channel named like the key.
-- O(1).

-- ACL: TYPE, HMGET, DEL and SPUBLISH. luakit_acl (below) checks, before anything else, every command
-- this script may run after its first write (the DEL): a user the ACL refuses one of them gets NOPERM
-- and nothing is written. A refused TYPE, HMGET or DEL would fail before any write (the server's
-- NOPERM error), so they are not checked: each check costs server time on every call.
luakit_acl({'spublish', KEYS[1], ''})

local s = luakit_type(KEYS[1], 'hash')
if s ~= 1 then
  return s
end
local v = redis.call('HMGET', KEYS[1], 'gen', 'count')
if not v[1] or not latch_count(v[2]) then
  return -3
end
if v[1] ~= ARGV[1] then
  return -2
end
redis.call('DEL', KEYS[1])
redis.call('SPUBLISH', KEYS[1], 'delete')
return 1
