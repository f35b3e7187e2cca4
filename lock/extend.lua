-- extend: restart the lease's expiry, only for its current owner. The fencing token is unchanged.
--
-- KEYS[1]  lease key
-- ARGV[1]  owner token
-- ARGV[2]  new TTL in whole milliseconds (>= 1), counted from now on the server
--
-- Returns 1 when extended, 0 when the lease is absent or held by another owner (nothing written). O(1).
-- ACL: GET and PEXPIRE. PEXPIRE is the only write and the last command, so a user the ACL refuses one
-- of them gets the server's NOPERM error and nothing is written: no luakit_acl check is needed.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
