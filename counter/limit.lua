-- limit: increment a counter only if the result is at most an inclusive upper limit
-- (Store.IncrementUpTo).
--
-- KEYS[1]  the counter key (a string holding a decimal int64; absent = 0)
-- ARGV[1]  delta: canonical decimal int64, > 0
-- ARGV[2]  limit: canonical decimal int64, inclusive (allowed iff current + delta <= limit)
-- ARGV[3]  ttl in milliseconds: 0 = none; > 0 is applied with PEXPIRE only when this call creates the
--          key (a fixed window: later increments never extend it)
--
-- Returns a status row (luakit's reply convention), one of:
--   {allowed, value, pttl}  allowed 1 (ok) or 0 (busy: refused); value the new (allowed) or unchanged (refused) value as a
--                           decimal string ("0" for an absent key); pttl the key's PTTL in
--                           milliseconds after the call (-1 no expiry, -2 absent)
--   {-3, 'not_integer'}     foreign: the key holds a string that is not a canonical decimal int64; nothing
--                           written
-- A key of another type fails with the server's WRONGTYPE at the GET, before anything is written.
-- The comparison is exact over the whole int64 range: both sides are split into (high, low) parts of
-- 9 decimal digits, which Lua's doubles hold exactly (luakit_int64_split, luakit's prelude). A refused call writes nothing; an allowed call
-- cannot overflow (the result is <= limit).
-- ACL: GET, INCRBY, PEXPIRE (ttl > 0) and PTTL. luakit_acl (below) checks, before anything else, every
-- command this script may run after its first write (the INCRBY): a user the ACL refuses one of them
-- gets NOPERM and nothing is written. A refused INCRBY fails before any write (the server's NOPERM
-- error), so it is not checked: each check costs server time on every call. Complexity: O(1).

luakit_acl({'get', KEYS[1]}, {'pttl', KEYS[1]})
if ARGV[3] ~= '0' then
  luakit_acl({'pexpire', KEYS[1], '1'})
end
local cur = redis.call('GET', KEYS[1])
local curs = cur or '0'
if not luakit_int64(curs) then
  return {-3, 'not_integer'}
end
local ch, cl = luakit_int64_split(curs)
local dh, dl = luakit_int64_split(ARGV[1])
local lh, ll = luakit_int64_split(ARGV[2])
local sh, sl = ch + dh, cl + dl
if sl >= 1e9 then sl = sl - 1e9; sh = sh + 1 end
if sh < lh or (sh == lh and sl <= ll) then
  redis.call('INCRBY', KEYS[1], ARGV[1])
  if not cur and ARGV[3] ~= '0' then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
  end
  return {1, redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
end
return {0, curs, redis.call('PTTL', KEYS[1])}
