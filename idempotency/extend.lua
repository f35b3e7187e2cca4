-- extend: renew a pending claim's lease, for its current owner only.
--
-- KEYS[1]  claim hash (fields as in begin.lua)
-- ARGV[1]  owner token
-- ARGV[2]  generation (decimal string, as begin returned it)
-- ARGV[3]  new lease in whole milliseconds (>= 1, validated by the caller)
--
-- Returns 1 when the claim was pending with this owner token and generation: its expiry restarts at
-- ARGV[3] and field x records it. Returns 0 otherwise (absent, expired, completed, abandoned, another
-- owner or generation) and writes nothing: a completed result's retention is never changed. Returns
-- -1, writing nothing, when the key holds another Redis type. O(1).
-- ACL: TYPE, HMGET, HSET and PEXPIRE. luakit_acl (below) checks, before anything else, every command
-- this script may run after its first write (the HSET): a user the ACL refuses one of them gets NOPERM
-- and nothing is written. A refused TYPE, HMGET or HSET would fail before any write (the server's
-- NOPERM error), so they are not checked: each check costs server time on every call.
luakit_acl({'pexpire', KEYS[1]})
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  return 0
end
if kind ~= 'hash' then
  return -1
end
local h = redis.call('HMGET', KEYS[1], 's', 't', 'g')
if h[1] ~= 'p' or h[2] ~= ARGV[1] or h[3] ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], 'x', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
