-- incr: add a signed delta to a counter and optionally (re)set its expiry.
--
-- KEYS[1]  the counter key (a string holding a decimal int64; absent = 0)
-- ARGV[1]  delta: canonical decimal int64 (any sign)
-- ARGV[2]  ttl in milliseconds: 0 leaves the key's expiry unchanged, > 0 sets PEXPIRE ttl on every call
--          (a sliding expiry)
--
-- Returns the new value alone, as a decimal string (GET after INCRBY: exact above 2^53, where a Lua
-- number would round): luakit's reply convention lets a script whose one answer is an int64 on a hot
-- path send it without a status row, which would cost the client an allocation per reply. INCRBY is the first write: when it fails (the value is not an integer, the result would
-- overflow int64, WRONGTYPE) the script raises that error and nothing is written.
-- ACL: INCRBY, PEXPIRE (ttl > 0) and GET. luakit_acl (below) checks, before anything else, every
-- command this script may run after its first write (the INCRBY): a user the ACL refuses one of them
-- gets NOPERM and nothing is written. A refused INCRBY fails before any write (the server's NOPERM
-- error), so it is not checked: each check costs server time on every call. Complexity: O(1).
luakit_acl({'get', KEYS[1]})
if ARGV[2] ~= '0' then
  luakit_acl({'pexpire', KEYS[1], '1'})
end
redis.call('INCRBY', KEYS[1], ARGV[1])
if ARGV[2] ~= '0' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return redis.call('GET', KEYS[1])
