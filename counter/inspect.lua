-- inspect: read a counter and its expiry for an operator, writing nothing.
--
-- KEYS[1]  counter key (a string holding a decimal int64)
--
-- Returns a status row (luakit's reply convention): {-1} when the key is absent, {1, value, pttl} when
-- it holds a string (value as stored, for the caller to check as a canonical decimal int64; pttl in ms,
-- -1 without expiry), {-3} (foreign) for another Redis type. Never writes: no value and no expiry changes. O(1).
local s = luakit_type(KEYS[1], 'string')
if s ~= 1 then
  return {s}
end
return {1, redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
