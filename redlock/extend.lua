-- extend: reset the lock's TTL on this node, only for its current owner.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner token
-- ARGV[2]  new TTL in milliseconds (positive integer)
--
-- Returns 1 when extended, 0 when this owner does not hold the lock on this node (nothing written). O(1).
-- ACL: luakit_acl (below) checks every command this script may run before anything else, so a
-- user the ACL refuses one of them gets NOPERM and nothing is written.
luakit_acl({'get', KEYS[1]}, {'pexpire', KEYS[1]})
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
