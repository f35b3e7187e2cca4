-- denylist_read: is an identity on the deny list?
--
-- KEYS[1]  the deny-list key: a set of denied identities (absent = empty set)
-- ARGV[1]  the identity (any bytes, not empty)
--
-- Returns a status alone (luakit's reply convention): 1 when ARGV[1] is a member of the set, -1 (absent)
-- otherwise. Writes nothing. A key of another type
-- is the server's own WRONGTYPE error (raised by SISMEMBER).
-- Complexity: O(1).
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then
  return 1
end
return -1
