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
local function kind(key)
  local t = redis.call('TYPE', key)
  if type(t) == 'table' then t = t['ok'] end
  return t
end
local lt = kind(KEYS[1])
local ft = 'none'
if #KEYS > 1 then
  ft = kind(KEYS[2])
end
if (lt ~= 'none' and lt ~= 'string') or (ft ~= 'none' and ft ~= 'string') then
  return {-3, -2, '', ''}
end
local held, pttl, owner, fence = -1, -2, '', ''
if lt == 'string' then
  held = 1
  pttl = redis.call('PTTL', KEYS[1])
  owner = redis.sha1hex(redis.call('GET', KEYS[1]))
end
if ft == 'string' then
  fence = redis.call('GET', KEYS[2])
end
return {held, pttl, owner, fence}
