-- floor: decrement a counter only if the result is at least an inclusive floor
-- (Store.DecrementDownTo).
--
-- KEYS[1]  the counter key (a string holding a decimal int64; absent = 0)
-- ARGV[1]  delta: canonical decimal int64, > 0 (the amount to subtract)
-- ARGV[2]  floor: canonical decimal int64, inclusive (allowed iff current - delta >= floor)
--
-- Returns a status row (luakit's reply convention), one of:
--   {allowed, value, pttl}  allowed 1 (ok) or 0 (busy: refused); value the new (allowed) or unchanged
--                           (refused) value as a decimal string ("0" for an absent key); pttl the
--                           key's PTTL in milliseconds after the call (-1 no expiry, -2 absent)
--   {-3, 'not_integer'}     foreign: the key holds a string that is not a canonical decimal int64;
--                           nothing written
-- A key of another type fails with the server's WRONGTYPE at the GET, before anything is written.
-- The key's expiry is never changed; an allowed call on an absent key creates it without expiry.
-- The comparison is exact over the whole int64 range (see limit.lua); a refused call writes nothing;
-- an allowed call cannot overflow (the result is >= floor).
-- ACL: GET, DECRBY and PTTL. luakit_acl (below) checks, before anything else, every command this script
-- may run after its first write (the DECRBY; GET runs again after it, and PTTL): a user the ACL refuses one of them
-- gets NOPERM and nothing is written. A refused DECRBY fails before any write (the server's NOPERM
-- error), so it is not checked: each check costs server time on every call. Complexity: O(1).

luakit_acl({'get', KEYS[1]}, {'pttl', KEYS[1]})
local cur = redis.call('GET', KEYS[1])
local curs = cur or '0'
if not luakit_int64(curs) then
  return {-3, 'not_integer'}
end
local ch, cl = luakit_int64_split(curs)
local dh, dl = luakit_int64_split(ARGV[1])
local mh, ml = luakit_int64_split(ARGV[2])
local rh, rl = ch - dh, cl - dl
if rl < 0 then rl = rl + 1e9; rh = rh - 1 end
if rh > mh or (rh == mh and rl >= ml) then
  redis.call('DECRBY', KEYS[1], ARGV[1])
  return {1, redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
end
return {0, curs, redis.call('PTTL', KEYS[1])}
