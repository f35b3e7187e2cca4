-- abort: fail one generation with a reason, kept in the hash so late waiters and joiners see it.
--
-- KEYS[1]  latch key: a hash {gen, count, initial, expires[, aborted][, prevdone]}
-- ARGV[1]  the caller's generation id
-- ARGV[2]  the reason (opaque bytes, may be empty)
--
-- Returns one of:
--   {1}            aborted now; the count is unchanged
--   {-1}           the key holds another generation (replaced); nothing was written
--   {-2, now}      no latch at the key (deleted or expired); now is the server time in Unix ms (string)
--   {-3, reason}   the generation was already aborted (with reason); nothing was written
--   {-4}           the count had already reached zero; nothing was written
--   {-5}           the key holds something that is not a latch (another type, a hash without gen, or a
--                  count that is not a canonical decimal int64 >= 0); nothing was written
--
-- Publishes 'abort' on the sharded channel named like the key. O(1).

-- A count is a canonical decimal int64 >= 0 (what the scripts write); anything else, a missing field
-- (false) included, is foreign data.
-- ACL: TYPE, TIME, HMGET, HSET and SPUBLISH. luakit_acl (below) checks, before anything else, every
-- command this script may run after its first write (the HSET): a user the ACL refuses one of them
-- gets NOPERM and nothing is written. A refused TYPE, TIME, HMGET or HSET would fail before any write
-- (the server's NOPERM error), so they are not checked: each check costs server time on every call.
luakit_acl({'spublish', KEYS[1], ''})
local function valid_count(c)
  return type(c) == 'string' and (c == '0' or (string.match(c, '^[1-9]%d*$') ~= nil and
    (#c < 19 or (#c == 19 and c <= '9223372036854775807'))))
end

local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  local now = redis.call('TIME')
  return {-2, string.format('%d', tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000))}
end
if kind ~= 'hash' then
  return {-5}
end
local v = redis.call('HMGET', KEYS[1], 'gen', 'count', 'aborted')
if not v[1] or not valid_count(v[2]) then
  return {-5}
end
if v[1] ~= ARGV[1] then
  return {-1}
end
if v[3] then
  return {-3, v[3]}
end
if v[2] == '0' then
  return {-4}
end
redis.call('HSET', KEYS[1], 'aborted', ARGV[2])
redis.call('SPUBLISH', KEYS[1], 'abort')
return {1}
