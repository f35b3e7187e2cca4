-- acquire: take the named lease (one hash field) if it is free, with its own expiry.
--
-- KEYS[1]  hash key: a hash whose fields are named leases; each field holds its owner token and carries
--          its own expiry (HPEXPIRE). The hash itself must have no key-level expiry.
-- ARGV[1]  field: the lease name (opaque bytes)
-- ARGV[2]  owner token (opaque bytes)
-- ARGV[3]  lease TTL in whole milliseconds (>= 1)
--
-- Returns a status row (luakit's reply convention), one of:
--   {1, 0}     ok: acquired; the field now holds the owner token and expires in ARGV[3] ms
--   {0, pttl}  busy: the field is held; pttl is its remaining life in ms (HPTTL), -1 when the field
--              has no expiry (it was not written by this package)
--   {-5, pttl} mismatch: the hash key has a key-level expiry (pttl ms), which would delete every lease
--              at once; nothing was written
--
-- A key of another type raises WRONGTYPE before any write, with or without a key-level expiry. Every check runs before the first write,
-- so a failed acquisition changes nothing. Needs HPEXPIRE / HPTTL (Redis 7.4+, Valkey 9.0+). O(1).
-- ACL: PTTL, HPTTL, HSET and HPEXPIRE. luakit_acl (below) checks, before anything else, every command
-- this script may run after its first write (the HSET): a user the ACL refuses one of them gets NOPERM
-- and nothing is written. A refused PTTL, HPTTL or HSET would fail before any write (the server's
-- NOPERM error), so they are not checked: each check costs server time on every call.
luakit_acl({'hpexpire', KEYS[1]})
local kpttl = redis.call('PTTL', KEYS[1])
if kpttl ~= -2 then
  -- HPTTL first: on a key of another type it raises WRONGTYPE (foreign data), whatever its expiry.
  local fpttl = redis.call('HPTTL', KEYS[1], 'FIELDS', 1, ARGV[1])[1]
  if kpttl ~= -1 then
    return {-5, kpttl}
  end
  if fpttl ~= -2 then
    return {0, fpttl}
  end
end

redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HPEXPIRE', KEYS[1], ARGV[3], 'FIELDS', 1, ARGV[1])
return {1, 0}
