-- acquire: take the lease if it is free, issuing the next fencing token from the counter.
--
-- KEYS[1]  lease key: a string holding the owner token, with a PX expiry
-- KEYS[2]  fence key: the persistent counter (a string holding a non-negative int64, no expiry)
-- ARGV[1]  owner token (opaque bytes)
-- ARGV[2]  lease TTL in whole milliseconds (>= 1)
-- ARGV[3]  optional, "1": read the lease's PTTL first and answer {0, pttl} at once when it is held (a
--          waiter's first attempt, sent after CLIENT CACHING YES: the read arms tracking of the lease
--          key, and a held lock costs one command)
--
-- Returns one of:
--   token         acquired; token is the new counter value: an integer below 2^53, else the counter read
--                 back as a decimal string, because a Lua number is a double and cannot hold every int64
--                 above 2^53 (INCR's reply is returned only while it is exact)
--   {0, pttl}     not acquired: the lease is held; pttl is its remaining life in ms, -1 when it has no expiry
--   {-1, reason}  not acquired: the counter cannot issue a token (reason: wrongtype, expiring, negative,
--                 malformed, overflow) and the lease is free; nothing was written
--
-- Every counter check runs before the first write, so a failed acquisition changes nothing; a held lease
-- is reported as held whatever the counter holds. Commands on the common path: GET and (for an existing
-- counter) PTTL on the counter, SET NX PX on the lease, INCR; PTTL on the lease only when it is held. O(1).
-- ACL: luakit_acl (below) checks every command this script may run before anything else, so a
-- user the ACL refuses one of them gets NOPERM and nothing is written.
luakit_acl({'pttl', KEYS[1]}, {'get', KEYS[2]}, {'pttl', KEYS[2]}, {'set', KEYS[1]}, {'incr', KEYS[2]})

if ARGV[3] == '1' then
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl ~= -2 then
    return {0, pttl}
  end
end

-- The counter: GET tells a missing key (false) from another type (an error reply) without TYPE.
local reason
local v = redis.pcall('GET', KEYS[2])
if type(v) == 'table' then
  if not (v.err and string.sub(v.err, 1, 9) == 'WRONGTYPE') then
    return v
  end
  reason = 'wrongtype'
elseif v then
  if redis.call('PTTL', KEYS[2]) ~= -1 then
    reason = 'expiring'
  elseif string.match(v, '^%-[1-9]%d*$') then
    reason = 'negative'
  elseif not (v == '0' or string.match(v, '^[1-9]%d*$')) or #v > 19 or (#v == 19 and v > '9223372036854775807') then
    reason = 'malformed'
  elseif v == '9223372036854775807' then
    reason = 'overflow'
  end
end
if reason then
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl ~= -2 then
    return {0, pttl}
  end
  return {-1, reason}
end

if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {0, redis.call('PTTL', KEYS[1])}
end
local token = redis.call('INCR', KEYS[2])
if token >= 9007199254740992 then
  -- Above 2^53 the double may be rounded: read the exact value back.
  token = redis.call('GET', KEYS[2])
end
return token
