-- incr: add a signed delta to a counter and optionally (re)set its expiry.
--
-- KEYS[1]  the counter key (a string holding a decimal int64; absent = 0)
-- ARGV[1]  delta: canonical decimal int64 (any sign)
-- ARGV[2]  ttl in milliseconds: 0 leaves the key's expiry unchanged, > 0 sets PEXPIRE ttl on every call
--          (a sliding expiry)
--
-- Returns the new value as a decimal string (GET after INCRBY: exact above 2^53, where a Lua number
-- would round). INCRBY is the first write: when it fails (the value is not an integer, the result would
-- overflow int64, WRONGTYPE) the script raises that error and nothing is written.
-- Every command is checked against the caller's ACL first (luakit_acl): a refused one raises NOPERM and
-- nothing is written.
-- Complexity: O(1).
luakit_acl({'incrby', KEYS[1], '0'}, {'get', KEYS[1]})
if ARGV[2] ~= '0' then
  luakit_acl({'pexpire', KEYS[1], '1'})
end
redis.call('INCRBY', KEYS[1], ARGV[1])
if ARGV[2] ~= '0' then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return redis.call('GET', KEYS[1])
