-- complete: store the result of a pending claim, for its current owner only.
--
-- KEYS[1]  claim hash (fields as in begin.lua)
-- ARGV[1]  owner token
-- ARGV[2]  generation (decimal string, as begin returned it)
-- ARGV[3]  result bytes (binary, possibly empty)
-- ARGV[4]  retention in whole milliseconds (>= 1, validated by the caller): how long the result is
--          kept, independent of the claim lease
--
-- Returns 1 when the claim was pending with this owner token and generation: the state becomes
-- completed, the result is stored, the token is removed, field x becomes the retention and the key's
-- expiry restarts at the retention. Otherwise it writes nothing and returns idem_pending's status: -1
-- absent (expired, abandoned), -2 completed or another owner's or generation's, -3 the key holds
-- another Redis type (data this package did not write). A status alone (luakit's reply convention).
-- O(1) plus the result size.
-- ACL: TYPE, HMGET, HSET, HDEL and PEXPIRE. luakit_acl (below) checks, before anything else, every
-- command this script may run after its first write (the HSET): a user the ACL refuses one of them
-- gets NOPERM and nothing is written. A refused TYPE, HMGET or HSET would fail before any write (the
-- server's NOPERM error), so they are not checked: each check costs server time on every call.
luakit_acl({'hdel', KEYS[1]}, {'pexpire', KEYS[1]})
local s = idem_pending(KEYS[1], ARGV[1], ARGV[2])
if s ~= 1 then
  return s
end
redis.call('HSET', KEYS[1], 's', 'c', 'r', ARGV[3], 'x', ARGV[4])
redis.call('HDEL', KEYS[1], 't')
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
