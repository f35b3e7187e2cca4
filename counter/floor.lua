-- floor: decrement a counter only if the result is at least an inclusive floor
-- (Store.DecrementDownTo).
--
-- KEYS[1]  the counter key (a string holding a decimal int64; absent = 0)
-- ARGV[1]  delta: canonical decimal int64, > 0 (the amount to subtract)
-- ARGV[2]  floor: canonical decimal int64, inclusive (allowed iff current - delta >= floor)
--
-- Returns one of:
--   {allowed, value, pttl}  allowed 1 or 0; value the new (allowed) or unchanged (refused) value as a
--                           decimal string ("0" for an absent key); pttl the key's PTTL in
--                           milliseconds after the call (-1 no expiry, -2 absent)
--   {-1, 'not_integer'}  the key holds a string that is not a canonical decimal int64; nothing written
-- A key of another type fails with the server's WRONGTYPE at the GET, before anything is written.
-- The key's expiry is never changed; an allowed call on an absent key creates it without expiry.
-- The comparison is exact over the whole int64 range (see limit.lua); a refused call writes nothing;
-- an allowed call cannot overflow (the result is >= floor).
-- ACL: GET, DECRBY and PTTL. luakit_acl (below) checks, before anything else, every command this script
-- may run after its first write (the DECRBY; GET runs again after it, and PTTL): a user the ACL refuses one of them
-- gets NOPERM and nothing is written. A refused DECRBY fails before any write (the server's NOPERM
-- error), so it is not checked: each check costs server time on every call. Complexity: O(1).

-- canonical: as in limit.lua.
local function canonical(s)
  if s == '0' then return true end
  local digits = string.match(s, '^%-?([1-9]%d*)$')
  if not digits then return false end
  if #digits ~= 19 then return #digits < 19 end
  if string.sub(s, 1, 1) == '-' then return digits <= '9223372036854775808' end
  return digits <= '9223372036854775807'
end

local function split(s)
  local neg = string.sub(s, 1, 1) == '-'
  if neg then s = string.sub(s, 2) end
  local n = #s
  local hi, lo = 0, tonumber(s)
  if n > 9 then
    hi = tonumber(string.sub(s, 1, n - 9))
    lo = tonumber(string.sub(s, n - 8))
  end
  if neg then
    hi, lo = -hi, -lo
    if lo < 0 then lo = lo + 1e9; hi = hi - 1 end
  end
  return hi, lo
end

luakit_acl({'get', KEYS[1]}, {'pttl', KEYS[1]})
local cur = redis.call('GET', KEYS[1])
local curs = cur or '0'
if not canonical(curs) then
  return {-1, 'not_integer'}
end
local ch, cl = split(curs)
local dh, dl = split(ARGV[1])
local mh, ml = split(ARGV[2])
local rh, rl = ch - dh, cl - dl
if rl < 0 then rl = rl + 1e9; rh = rh - 1 end
if rh > mh or (rh == mh and rl >= ml) then
  redis.call('DECRBY', KEYS[1], ARGV[1])
  return {1, redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
end
return {0, curs, redis.call('PTTL', KEYS[1])}
