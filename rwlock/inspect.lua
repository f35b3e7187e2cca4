-- inspect: read a read-write lock's unexpired holders for an operator, writing nothing.
--
-- KEYS[1]  the lock key: a sorted set of 'r:<owner>' / 'w:<owner>' entries scored by their expiry in
--          server-time milliseconds (see acquire.lua)
--
-- Returns a status row (luakit's reply convention), one of:
--   {-1}                             absent: the key does not exist
--   {1, pttl, writer, r1, r2, ...}   ok: pttl is the key's PTTL in ms; writer the writer's remaining ms
--                                    (>= 1), or 0 when no writer holds it; r1...: each unexpired reader's
--                                    remaining ms (ascending)
--   {-3}                             foreign: the key holds another Redis type, or a member that is not
--                                    an entry
--
-- Expired entries (score <= now) are skipped, not removed; owner tokens are never returned. Never
-- writes: no member, score or expiry changes. O(log N + M) for M unexpired entries.
local s = luakit_type(KEYS[1], 'zset')
if s ~= 1 then
  return {s}
end
local now = luakit_now_ms()
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%.0f', now), '+inf', 'WITHSCORES')
local out = {1, redis.call('PTTL', KEYS[1]), 0}
for i = 1, #live, 2 do
  local tag = string.sub(live[i], 1, 2)
  local rem = tonumber(live[i + 1]) - now
  if tag == 'w:' then
    out[3] = rem
  elseif tag == 'r:' then
    out[#out + 1] = rem
  else
    return {-3}
  end
end
return out
