-- extend: restart the lease's expiry, only for its current owner. The fencing token is unchanged.
--
-- KEYS[1]  lease key
-- ARGV[1]  owner token
-- ARGV[2]  new TTL in whole milliseconds (>= 1), counted from now on the server
--
-- Returns a status alone (luakit's reply convention): 1 extended, -1 the lease is absent, -2 another
-- owner holds it (nothing written). O(1).
-- ACL: GET and PEXPIRE. PEXPIRE is the only write and the last command, so a user the ACL refuses one
-- of them gets the server's NOPERM error and nothing is written: no luakit_acl check is needed.
local s = luakit_owner(KEYS[1], ARGV[1])
if s == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return s
