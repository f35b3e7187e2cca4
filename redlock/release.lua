-- release: delete the lock on this node, only for its current owner. The fence counter is never touched.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner token
--
-- Returns 1 when deleted, 0 when no lock exists, -1 when another owner holds it (nothing written). O(1).
-- ACL: GET and DEL. DEL is the only write and the last command, so a user the ACL refuses one of them
-- gets the server's NOPERM error and nothing is written: no luakit_acl check is needed.
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
if v == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return -1
