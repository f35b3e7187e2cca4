-- extend: reset the lock's TTL on this node, only for its current owner.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner token
-- ARGV[2]  new TTL in milliseconds (positive integer)
--
-- Returns 1 when extended, 0 when this owner does not hold the lock on this node (nothing written). O(1).
-- ACL: GET and PEXPIRE. PEXPIRE is the only write and the last command, so a user the ACL refuses one
-- of them gets the server's NOPERM error and nothing is written: no luakit_acl check is needed.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
