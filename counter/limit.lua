-- limit: increment a counter only if the result stays within an inclusive upper limit.
--
-- KEYS[1]  the counter key (a string holding a decimal int64; absent = 0)
-- ARGV[1]  delta: canonical decimal int64, > 0
-- ARGV[2]  limit: canonical decimal int64, inclusive (allowed iff current + delta <= limit)
-- ARGV[3]  ttl in milliseconds: 0 = none; > 0 is applied with PEXPIRE only when this call creates the
--          key (a fixed window: later increments never extend it)
--
-- Returns {allowed, value, pttl}: allowed 1 or 0; value the new (allowed) or unchanged (denied) value
-- as a decimal string ("0" for an absent key); pttl the key's PTTL in milliseconds after the call
-- (-1 no expiry, -2 absent).
-- The comparison is exact over the whole int64 range: both sides are split into (high, low) parts of
-- 9 decimal digits, which Lua's doubles hold exactly. A denied call writes nothing; an allowed call
-- cannot overflow (the result is <= limit). A value that is not a decimal integer is an error with
-- nothing written.
-- Complexity: O(1).
local function split(s)
  local neg = string.sub(s, 1, 1) == '-'
  if neg then s = string.sub(s, 2) end
  local n = #s
  local hi, lo = 0, tonumber(s)
  if n > 9 then
    hi = tonumber(string.sub(s, 1, n - 9))
    lo = tonumber(string.sub(s, n - 8))
  end
  if neg then
    hi, lo = -hi, -lo
    if lo < 0 then lo = lo + 1e9; hi = hi - 1 end
  end
  return hi, lo
end

local cur = redis.call('GET', KEYS[1])
local curs = cur or '0'
if not string.match(curs, '^%-?%d+$') or #curs > 20 then
  return redis.error_reply('ERR value is not an integer or out of range')
end
local ch, cl = split(curs)
local dh, dl = split(ARGV[1])
local lh, ll = split(ARGV[2])
local sh, sl = ch + dh, cl + dl
if sl >= 1e9 then sl = sl - 1e9; sh = sh + 1 end
if sh < lh or (sh == lh and sl <= ll) then
  redis.call('INCRBY', KEYS[1], ARGV[1])
  if not cur and ARGV[3] ~= '0' then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
  end
  return {1, redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
end
return {0, curs, redis.call('PTTL', KEYS[1])}
