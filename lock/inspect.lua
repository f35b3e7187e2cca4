-- inspect: read a lock's state for an operator, writing nothing.
--
-- KEYS[1]  lease key (a string holding the owner token, with a PX expiry)
-- KEYS[2]  fence key (a persistent decimal int64 counter: the last fencing token issued)
--
-- Returns the status row {status, pttl, fence} (luakit's reply convention):
--   status 1 (ok) when the lease key exists, -1 (absent) when it does not, -3 (foreign) when either
--          key holds another Redis type
--   pttl   the lease key's PTTL in ms (-1 without expiry, which this package never writes); -2 when not held
--   fence  the fence key's value as stored (a string, '' when absent); the caller checks it is a
--          canonical decimal int64
--
-- Never returns the owner token and never writes: no value and no expiry changes. O(1).
local held = luakit_type(KEYS[1], 'string')
local fs = luakit_type(KEYS[2], 'string')
if held == -3 or fs == -3 then
  return {-3, -2, ''}
end
local pttl, fence = -2, ''
if held == 1 then
  pttl = redis.call('PTTL', KEYS[1])
end
if fs == 1 then
  fence = redis.call('GET', KEYS[2])
end
return {held, pttl, fence}
