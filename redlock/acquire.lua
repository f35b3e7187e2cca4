-- acquire: take the lock on this node when it is free (SET NX PX) and, in fenced mode, read the node's
-- fence counter in the same atomic step.
--
-- KEYS[1]  lock key
-- KEYS[2]  fence key (fenced mode only; absent otherwise)
-- ARGV[1]  owner token
-- ARGV[2]  lock TTL in milliseconds (positive integer)
--
-- Returns:
--   {1}                   acquired (unfenced)
--   {1, counter}          acquired (fenced); counter is the fence key's value as a decimal string,
--                         "0" when the fence key is absent
--   {0}                   another owner (or this owner, from an earlier attempt) holds the lock; nothing written
--   {-1, reason}          fenced mode: the fence key is unusable ("wrongtype", "expiring", "malformed",
--                         "negative"); nothing written
-- Complexity: O(1).
local fence = '0'
if #KEYS > 1 then
  local t = redis.call('TYPE', KEYS[2])
  if type(t) == 'table' then t = t['ok'] end
  if t ~= 'none' then
    if t ~= 'string' then return {-1, 'wrongtype'} end
    if redis.call('PTTL', KEYS[2]) ~= -1 then return {-1, 'expiring'} end
    fence = redis.call('GET', KEYS[2])
    if not string.match(fence, '^%d+$') or (#fence > 1 and string.sub(fence, 1, 1) == '0') or #fence > 19 then
      if string.match(fence, '^%-%d+$') then return {-1, 'negative'} end
      return {-1, 'malformed'}
    end
  end
end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {0}
end
if #KEYS > 1 then
  return {1, fence}
end
return {1}
