-- release: delete the lock on this node, only for its current owner. The fence counter is never touched.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner token
--
-- Returns 1 when deleted, 0 when no lock exists, -1 when another owner holds it (nothing written). O(1).
-- ACL: luakit_acl (below) checks every command this script may run before anything else, so a
-- user the ACL refuses one of them gets NOPERM and nothing is written.
luakit_acl({'get', KEYS[1]}, {'del', KEYS[1]})
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
if v == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return -1
