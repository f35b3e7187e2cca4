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
-- or generation) and writes nothing. Returns -1, writing nothing, when the key holds another Redis
-- type, or this owner's claim has a TTL field that is not a positive decimal integer (data this
-- package did not write; checked before the first write, so PEXPIRE cannot fail after HSET). O(1) plus
-- the result size.
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  return 0
end
if kind ~= 'hash' then
  return -1
end
local h = redis.call('HMGET', KEYS[1], 's', 't', 'g', 'x')
if h[1] ~= 'p' or h[2] ~= ARGV[1] or h[3] ~= ARGV[2] then
  return 0
end
-- x is what begin.lua wrote: a Go time.Duration in whole ms (at most 13 digits); 15 digits leave
-- room and keep PEXPIRE's now + x far from overflowing.
if not h[4] or not string.match(h[4], '^[1-9]%d*$') or #h[4] > 15 then
  return -1
end
redis.call('HSET', KEYS[1], 's', 'c', 'r', ARGV[3])
redis.call('HDEL', KEYS[1], 't')
redis.call('PEXPIRE', KEYS[1], h[4])
return 1
