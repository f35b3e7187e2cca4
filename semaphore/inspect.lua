-- inspect: read a semaphore's capacity and unexpired permits for an operator, writing nothing.
--
-- KEYS[1]  semaphore key: a sorted set of permits (member = owner token, score = expiry in server-time
--          ms, inf without expiry) and the reserved member "#capacity" scored -capacity
--
-- Returns a status row (luakit's reply convention), one of:
--   {-1}                         absent: the key does not exist (no permit is held)
--   {1, cap, pttl, r1, r2, ...}  ok: cap is the stored capacity (decimal string); pttl the key's PTTL in
--                                ms (-1 while a permit has no expiry); r1...: each unexpired permit's
--                                remaining ms, ascending, -1 for a permit without expiry (listed last);
--                                a permit of weight w is listed w times (one per member)
--   {-3}                         foreign: the key holds another Redis type, or a sorted set without
--                                "#capacity"
--
-- Expired permits (score <= now) are skipped, not pruned; owner tokens are never returned. Never
-- writes: no member, score or expiry changes. O(log N + M) for M unexpired permits.
local s = luakit_type(KEYS[1], 'zset')
if s ~= 1 then
  return {s}
end
local cap = redis.call('ZSCORE', KEYS[1], '#capacity')
if not cap then
  return {-3}
end
local now = luakit_now_ms()
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
