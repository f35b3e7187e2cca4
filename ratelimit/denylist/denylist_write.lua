-- denylist_write: add an identity to the deny list or remove it.
--
-- KEYS[1]  the deny-list key: a set of denied identities (absent = empty set)
-- ARGV[1]  the identity (any bytes, not empty)
-- ARGV[2]  "1" to add the identity (SADD), "0" to remove it (SREM)
--
-- Returns a status alone (luakit's reply convention): 1 when the set changed, -1 when the identity
-- already had the requested state (nothing written). No expiry is
-- set: membership persists until removed (SREM of the last member deletes the key, as Redis does). A
-- key of another type is the server's own WRONGTYPE error (raised by SADD or SREM) with nothing
-- written.
-- Complexity: O(1).
-- ACL: SADD or SREM. The one command is the only write, so a user the ACL refuses one of them gets the
-- server's NOPERM error and nothing is written: no luakit_acl check is needed.
local n
if ARGV[2] == '1' then
  n = redis.call('SADD', KEYS[1], ARGV[1])
else
  n = redis.call('SREM', KEYS[1], ARGV[1])
end
if n == 1 then
  return 1
end
return -1
