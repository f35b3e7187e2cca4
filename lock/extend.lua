-- extend: restart the lease's expiry, only for its current owner. The fencing token is unchanged.
--
-- KEYS[1]  lease key
-- ARGV[1]  owner token
-- ARGV[2]  new TTL in whole milliseconds (>= 1), counted from now on the server
--
-- Returns 1 when extended, 0 when the lease is absent or held by another owner (nothing written). O(1).
-- ACL: luakit_acl (below) checks every command this script may run before anything else, so a
-- user the ACL refuses one of them gets NOPERM and nothing is written.
luakit_acl({'get', KEYS[1]}, {'pexpire', KEYS[1]})
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
