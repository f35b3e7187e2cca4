-- extend: renew a pending claim's lease, for its current owner only.
--
-- KEYS[1]  claim hash (fields as in begin.lua)
-- ARGV[1]  owner token
-- ARGV[2]  generation (decimal string, as begin returned it)
-- ARGV[3]  new lease in whole milliseconds (>= 1, validated by the caller)
--
-- Returns a status alone (luakit's reply convention): 1 when the claim was pending with this owner
-- token and generation: its expiry restarts at ARGV[3] and field x records it. Otherwise it writes
-- nothing (a completed result's retention is never changed) and returns idem_pending's status: -1
-- absent (expired, abandoned), -2 completed or another owner's or generation's, -3 the key holds
-- another Redis type. O(1).
-- ACL: TYPE, HMGET, HSET and PEXPIRE. luakit_acl (below) checks, before anything else, every command
-- this script may run after its first write (the HSET): a user the ACL refuses one of them gets NOPERM
-- and nothing is written. A refused TYPE, HMGET or HSET would fail before any write (the server's
-- NOPERM error), so they are not checked: each check costs server time on every call.
luakit_acl({'pexpire', KEYS[1]})
local s = idem_pending(KEYS[1], ARGV[1], ARGV[2])
if s ~= 1 then
  return s
end
redis.call('HSET', KEYS[1], 'x', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
