-- release: delete the lease, only for its current owner. The counter is never touched.
--
-- KEYS[1]  lease key
-- ARGV[1]  owner token
--
-- Returns 1 when deleted, 0 when no lease exists, -1 when another owner holds it (nothing written). O(1).
-- ACL: GET and DEL. DEL is the only write and the last command, so a user the ACL refuses either
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
