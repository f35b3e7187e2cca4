-- verify: report whether this owner holds the lock on this node, without changing anything.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner token
--
-- Returns 1 when the lock key holds the owner token, 0 when it is absent or holds another owner's
-- token (nothing written). O(1).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return 1
end
return 0
