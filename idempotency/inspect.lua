-- inspect: read a claim's state for an operator, writing nothing.
--
-- KEYS[1]  claim hash (fields as in begin.lua)
--
-- Returns a status row (luakit's reply convention), one of:
--   {-1}                           absent: the key does not exist (never claimed, expired, abandoned)
--   {1, gen, x, pttl, 0}           ok, pending: generation (decimal string), the lease last granted (x,
--                                  decimal string of whole ms), the remaining life in ms
--   {-7, gen, x, pttl, size}       completed: as above with the retention as x, and the result's
--                                  length in bytes (HSTRLEN; the result itself is not sent)
--   {-3, reason}                   foreign: the key holds data this package did not write: another
--                                  Redis type ('wrongtype') or a hash without a valid state ('foreign')
--
-- Never returns the owner token or the fingerprint, and never writes: the key's fields and expiry are
-- unchanged. O(1).
local s = luakit_type(KEYS[1], 'hash')
if s == -1 then
  return {-1}
end
if s == -3 then
  return {-3, 'wrongtype'}
end
local h = redis.call('HMGET', KEYS[1], 's', 'g', 'x')
if not h[2] or not h[3] then
  return {-3, 'foreign'}
end
local pttl = redis.call('PTTL', KEYS[1])
if h[1] == 'p' then
  return {1, h[2], h[3], pttl, 0}
end
if h[1] == 'c' and redis.call('HEXISTS', KEYS[1], 'r') == 1 then
  return {-7, h[2], h[3], pttl, redis.call('HSTRLEN', KEYS[1], 'r')}
end
return {-3, 'foreign'}
