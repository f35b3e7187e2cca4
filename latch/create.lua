-- create: start a new latch generation at the key, either only when nothing is there (create) or
-- replacing the current generation (reset), and wake every waiter of the key.
--
-- KEYS[1]  latch key: a hash {gen, count, initial, expires[, aborted][, prevdone]}
-- ARGV[1]  mode: 'create' (fail when a latch exists) or 'reset' (create or replace)
-- ARGV[2]  the new generation id (opaque bytes, unique per generation)
-- ARGV[3]  initial count: a canonical decimal int64 >= 0
-- ARGV[4]  expiry of the whole latch in whole milliseconds; '0' for none
--
-- Returns a status row (luakit's reply convention), one of:
--   {1, expires}       ok: created; expires is the server-time deadline in Unix ms as a decimal string,
--                      '0' for none
--   {0, gen}           busy: mode 'create' and a latch exists; gen is its current generation; nothing
--                      was written
--   {-3, 'wrongtype'}  foreign: the key holds something that is not a latch (another type, a hash
--                      without gen, or a count that is not a canonical decimal int64 >= 0); nothing was
--                      written
--
-- A reset of a generation whose count had reached zero records that generation in 'prevdone', so its
-- late waiters still report completion. Publishes 'reset' on the sharded channel named like the key
-- (SPUBLISH, same slot as the key). O(1).

-- ACL: TYPE, HMGET, DEL, TIME, HSET, PEXPIRE and SPUBLISH. luakit_acl (below) checks, before anything
-- else, every command this script may run after its first write (the DEL of a reset, else the HSET): a
-- user the ACL refuses one of them gets NOPERM and nothing is written. A refused TYPE, HMGET or DEL
-- would fail before any write (the server's NOPERM error), so they are not checked: each check costs
-- server time on every call.
luakit_acl({'time'}, {'hset', KEYS[1]}, {'pexpire', KEYS[1]}, {'spublish', KEYS[1], ''})

local kind = luakit_type(KEYS[1], 'hash')
local prev = false
if kind ~= -1 then
  if kind == -3 then
    return {-3, 'wrongtype'}
  end
  local old = redis.call('HMGET', KEYS[1], 'gen', 'count')
  if not old[1] or not latch_count(old[2]) then
    return {-3, 'wrongtype'}
  end
  if ARGV[1] == 'create' then
    return {0, old[1]}
  end
  if old[2] == '0' then
    prev = old[1]
  end
  redis.call('DEL', KEYS[1])
end

local expires = '0'
if ARGV[4] ~= '0' then
  expires = string.format('%d', luakit_now_ms() + tonumber(ARGV[4]))
end
redis.call('HSET', KEYS[1], 'gen', ARGV[2], 'count', ARGV[3], 'initial', ARGV[3], 'expires', expires)
if prev then
  redis.call('HSET', KEYS[1], 'prevdone', prev)
end
if ARGV[4] ~= '0' then
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
redis.call('SPUBLISH', KEYS[1], 'reset')
return {1, expires}
