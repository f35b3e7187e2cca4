-- complete: store the result of a pending claim, for its current owner only.
--
-- KEYS[1]  claim hash (fields as in begin.lua)
-- ARGV[1]  owner token
-- ARGV[2]  generation (decimal string, as begin returned it)
-- ARGV[3]  result bytes (binary, possibly empty)
--
-- Returns 1 when the claim was pending with this owner token and generation: the state becomes
-- completed, the result is stored, the token is removed and the key's expiry restarts at the claim's
-- TTL (field x, whole ms). Returns 0 otherwise (absent, expired, completed, abandoned, another owner
-- or generation) and writes nothing. O(1) plus the result size.
local h = redis.call('HMGET', KEYS[1], 's', 't', 'g', 'x')
if h[1] ~= 'p' or h[2] ~= ARGV[1] or h[3] ~= ARGV[2] or not h[4] then
  return 0
end
redis.call('HSET', KEYS[1], 's', 'c', 'r', ARGV[3])
redis.call('HDEL', KEYS[1], 't')
redis.call('PEXPIRE', KEYS[1], h[4])
return 1
