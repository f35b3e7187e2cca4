-- inspect: read a read-write lock's unexpired holders for an operator, writing nothing.
--
-- KEYS[1]  the lock key: a sorted set of 'r:<owner>' / 'w:<owner>' entries scored by their expiry in
--          server-time milliseconds (see acquire.lua)
--
-- Returns one of:
--   {0}                              the key is absent
--   {1, pttl, writer, r1, r2, ...}   pttl: the key's PTTL in ms; writer: the writer's remaining ms, or
--                                    -1 when no writer holds it; r1...: each unexpired reader's remaining
--                                    ms (ascending)
--   {-1}                             the key holds another Redis type, or a member that is not an entry
--
-- Expired entries (score <= now) are skipped, not removed; owner tokens are never returned. Never
-- writes: no member, score or expiry changes. O(log N + M) for M unexpired entries.
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  return {0}
end
if kind ~= 'zset' then
  return {-1}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%.0f', now), '+inf', 'WITHSCORES')
local out = {1, redis.call('PTTL', KEYS[1]), -1}
for i = 1, #live, 2 do
  local tag = string.sub(live[i], 1, 2)
  local rem = tonumber(live[i + 1]) - now
  if tag == 'w:' then
    out[3] = rem
  elseif tag == 'r:' then
    out[#out + 1] = rem
  else
    return {-1}
  end
end
return out
