-- extend: restart the named lease's expiry, only for its current owner.
--
-- KEYS[1]  hash key
-- ARGV[1]  field
-- ARGV[2]  owner token
-- ARGV[3]  new TTL in whole milliseconds (>= 1), counted from now on the server
--
-- Returns 1 when extended, 0 when the field is absent or held by another owner (nothing written). O(1).
-- ACL: HGET and HPEXPIRE. HPEXPIRE is the only write and the last command, so a user the ACL refuses
-- one of them gets the server's NOPERM error and nothing is written: no luakit_acl check is needed.
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HPEXPIRE', KEYS[1], ARGV[3], 'FIELDS', 1, ARGV[1])
  return 1
end
return 0
