-- verify: report whether the owner still holds the lease, at one instant. Read-only.
--
-- KEYS[1]  lease key
-- ARGV[1]  owner token
--
-- Returns the lease's remaining life in ms (-1 when it has no expiry) when the owner holds it, else -2. O(1).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PTTL', KEYS[1])
end
return -2
