-- release: delete the named lease, only for its current owner. Other fields are never touched.
--
-- KEYS[1]  hash key
-- ARGV[1]  field
-- ARGV[2]  owner token
--
-- Returns 1 when deleted, 0 when the field does not exist, -1 when another owner holds it (nothing
-- written). Deleting the last field deletes the hash. O(1).
-- ACL: HGET and HDEL. HDEL is the only write and the last command, so a user the ACL refuses one of
-- them gets the server's NOPERM error and nothing is written: no luakit_acl check is needed.
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then
  return 0
end
if v == ARGV[2] then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 1
end
return -1
