-- begin: claim the key for a new owner, or report the existing claim or result.
--
-- KEYS[1]  claim hash. Fields: s = state ('p' pending, 'c' completed), f = encoded fingerprint
--          ("\0" for none, "\1" .. digest otherwise), g = generation (decimal), t = owner token
--          (pending only), x = the current state's TTL in whole milliseconds (the claim lease while
--          pending, the retention once completed; informational, read by inspect.lua only),
--          r = result bytes (completed only)
-- ARGV[1]  owner token (opaque bytes, random)
-- ARGV[2]  claim lease in whole milliseconds (>= 1): the pending claim's TTL
-- ARGV[3]  encoded fingerprint (as field f)
--
-- Returns a status row (luakit's reply convention), one of:
--   {1, gen}           ok, started: the key was absent; a pending claim owned by ARGV[1] now exists
--                      with PEXPIRE ARGV[2]; gen is the server's TIME in microseconds as a decimal string
--   {-7, gen, result}  completed: the stored result (binary, possibly empty)
--   {0, gen, pttl}     busy, in progress: a pending claim exists; pttl is its remaining life in ms
--   {-5}               mismatch: the fingerprint differs; nothing about the claim is returned
--   {-3, reason}       foreign: the key holds data this package did not write: another Redis type
--                      (reason 'wrongtype'), a hash without a state field ('foreign'), or a claim whose
--                      state lacks its fields ('state'); nothing was written
--
-- Lookups never write: an existing claim's expiry is unchanged. O(1) (O(N) in the result size for
-- the reply).
-- ACL: TYPE, HMGET, PTTL, TIME, HSET and PEXPIRE. luakit_acl (below, on the path that claims)
-- checks, before the first write (the HSET), every command this script may run after it and the
-- commands the new claim will need from its owner: HMGET (Extend, Complete and Abandon read the
-- claim first), HDEL (Complete) and DEL (Abandon); HSET, the first write, fails on its own. A user
-- the ACL refuses one of them gets NOPERM and nothing is written, so no claim is made that its owner
-- could not complete or abandon (the work it guards would run, and the claim would turn retries away
-- until its lease ended). Lookups check nothing (each check costs server time): a refused TYPE,
-- HMGET or PTTL fails before any write with the server's NOPERM error.
local kind = luakit_type(KEYS[1], 'hash')
if kind ~= -1 then
  if kind == -3 then
    return {-3, 'wrongtype'}
  end
  local h = redis.call('HMGET', KEYS[1], 's', 'f', 'g', 'r')
  if not h[1] then
    return {-3, 'foreign'}
  end
  if h[2] ~= ARGV[3] then
    return {-5}
  end
  if h[1] == 'c' and h[3] and h[4] then
    return {-7, h[3], h[4]}
  end
  if h[1] == 'p' and h[3] then
    return {0, h[3], redis.call('PTTL', KEYS[1])}
  end
  return {-3, 'state'}
end

luakit_acl({'pexpire', KEYS[1]}, {'hmget', KEYS[1]}, {'hdel', KEYS[1]}, {'del', KEYS[1]})
local gen = string.format('%d', luakit_now_us())
redis.call('HSET', KEYS[1], 's', 'p', 'f', ARGV[3], 'g', gen, 't', ARGV[1], 'x', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, gen}
