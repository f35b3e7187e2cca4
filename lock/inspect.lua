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
local lt = redis.call('TYPE', KEYS[1])['ok']
local ft = redis.call('TYPE', KEYS[2])['ok']
if (lt ~= 'none' and lt ~= 'string') or (ft ~= 'none' and ft ~= 'string') then
  return {-3, -2, ''}
end
local held, pttl, fence = -1, -2, ''
if lt == 'string' then
  held = 1
  pttl = redis.call('PTTL', KEYS[1])
end
if ft == 'string' then
  fence = redis.call('GET', KEYS[2])
end
return {held, pttl, fence}
