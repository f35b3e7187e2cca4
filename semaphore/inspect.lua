-- inspect: read a semaphore's capacity and unexpired permits for an operator, writing nothing.
--
-- KEYS[1]  semaphore key: a sorted set of permits (member = owner token, score = expiry in server-time
--          ms, inf without expiry) and the reserved member "#capacity" scored -capacity
--
-- Returns one of:
--   {0}                          the key is absent (no permit is held)
--   {1, cap, pttl, r1, r2, ...}  cap: the stored capacity (decimal string); pttl: the key's PTTL in ms
--                                (-1 while a permit has no expiry); r1...: each unexpired permit's
--                                remaining ms, ascending, -1 for a permit without expiry (listed last)
--   {-1}                         the key holds another Redis type, or a sorted set without "#capacity"
--
-- Expired permits (score <= now) are skipped, not pruned; owner tokens are never returned. Never
-- writes: no member, score or expiry changes. O(log N + M) for M unexpired permits.
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  return {0}
end
if kind ~= 'zset' then
  return {-1}
end
local cap = redis.call('ZSCORE', KEYS[1], '#capacity')
if not cap then
  return {-1}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%.0f', now), '+inf', 'WITHSCORES')
local out = {1, string.format('%.0f', -tonumber(cap)), redis.call('PTTL', KEYS[1])}
for i = 2, #live, 2 do
  local s = tonumber(live[i])
  if s == math.huge then
    out[#out + 1] = -1
  else
    out[#out + 1] = s - now
  end
end
return out
