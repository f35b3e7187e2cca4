-- inspect: read this node's view of a lock for an operator, writing nothing.
--
-- KEYS[1]  lock key (a string holding the owner token, with a PX expiry)
-- KEYS[2]  fence key (fenced mode only; absent otherwise)
--
-- Returns the status row {status, pttl, owner, fence} (luakit's reply convention):
--   status 1 (ok) when the lock key exists, -1 (absent) when it does not, -3 (foreign) when either key
--          holds another Redis type
--   pttl   the lock key's PTTL in ms (-1 without expiry, which redlock never writes); -2 when not held
--   owner  SHA-1 of the owner token (hex), '' when not held: tells whether nodes hold the same owner
--          without revealing the token
--   fence  the fence key's value as stored (a string, '' when absent or unfenced); the caller checks it
--          is a canonical decimal int64
--
-- Never returns the owner token and never writes: no value and no expiry changes. O(1).
local held = luakit_type(KEYS[1], 'string')
local fs = -1
if #KEYS > 1 then
  fs = luakit_type(KEYS[2], 'string')
end
if held == -3 or fs == -3 then
  return {-3, -2, '', ''}
end
local pttl, owner, fence = -2, '', ''
if held == 1 then
  pttl = redis.call('PTTL', KEYS[1])
  owner = redis.sha1hex(redis.call('GET', KEYS[1]))
end
if fs == 1 then
  fence = redis.call('GET', KEYS[2])
end
return {held, pttl, owner, fence}
