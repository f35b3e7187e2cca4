-- acquire: take the lease if it is free, issuing the next fencing token from the counter.
--
-- KEYS[1]  lease key: a string holding the owner token, with a PX expiry
-- KEYS[2]  fence key: the persistent counter (a string holding a non-negative int64, no expiry)
-- ARGV[1]  owner token (opaque bytes)
-- ARGV[2]  lease TTL in whole milliseconds (>= 1)
--
-- Returns one of:
--   {1, token}    acquired; token is the new counter value as a decimal string, because a Lua number is a
--                 double and cannot hold every int64 above 2^53 (INCR's reply is not returned directly)
--   {0, pttl}     not acquired: the lease is held; pttl is its remaining life in ms, -1 when it has no expiry
--   {-1, reason}  not acquired: the counter cannot issue a token (reason: wrongtype, expiring, negative,
--                 malformed, overflow); nothing was written
--
-- Every check runs before the first write, so a failed acquisition changes nothing. O(1).
-- ACL: luakit_acl (below) checks every command this script may run before anything else, so a
-- user the ACL refuses one of them gets NOPERM and nothing is written.
luakit_acl({'pttl', KEYS[1]}, {'type', KEYS[2]}, {'pttl', KEYS[2]}, {'get', KEYS[2]},
  {'incr', KEYS[2]}, {'set', KEYS[1]})
local pttl = redis.call('PTTL', KEYS[1])
if pttl ~= -2 then
  return {0, pttl}
end

local kind = redis.call('TYPE', KEYS[2])['ok']
if kind ~= 'none' then
  if kind ~= 'string' then
    return {-1, 'wrongtype'}
  end
  if redis.call('PTTL', KEYS[2]) ~= -1 then
    return {-1, 'expiring'}
  end
  local v = redis.call('GET', KEYS[2])
  if string.match(v, '^%-[1-9]%d*$') then
    return {-1, 'negative'}
  end
  if not (v == '0' or string.match(v, '^[1-9]%d*$')) then
    return {-1, 'malformed'}
  end
  if #v > 19 or (#v == 19 and v > '9223372036854775807') then
    return {-1, 'malformed'}
  end
  if v == '9223372036854775807' then
    return {-1, 'overflow'}
  end
end

redis.call('INCR', KEYS[2])
local token = redis.call('GET', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, token}
