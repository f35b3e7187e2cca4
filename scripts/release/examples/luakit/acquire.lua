-- The script that luakit's README example loads (acquire.lua beside the program).
-- KEYS[1] lease key, KEYS[2] fence key; ARGV[1] owner token, ARGV[2] TTL in milliseconds.
-- Returns the new fencing token as a decimal string, or false when the lease is held.
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return false
end
redis.call('INCR', KEYS[2])
return redis.call('GET', KEYS[2])
