-- extend: restart the named lease's expiry, only for its current owner.
--
-- KEYS[1]  hash key
-- ARGV[1]  field
-- ARGV[2]  owner token
-- ARGV[3]  new TTL in whole milliseconds (>= 1), counted from now on the server
--
-- Returns a status alone (luakit's reply convention): 1 extended, -1 the field is absent, -2 another
-- owner holds it (nothing written). O(1).
-- ACL: HGET and HPEXPIRE. HPEXPIRE is the only write and the last command, so a user the ACL refuses
-- one of them gets the server's NOPERM error and nothing is written: no luakit_acl check is needed.
local s = luakit_owner(KEYS[1], ARGV[2], ARGV[1])
if s == 1 then
  redis.call('HPEXPIRE', KEYS[1], ARGV[3], 'FIELDS', 1, ARGV[1])
end
return s
