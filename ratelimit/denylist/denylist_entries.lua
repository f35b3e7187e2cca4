-- denylist_entries: list the deny list (read-only; run by EVALSHA_RO).
--
-- KEYS[1]  the deny-list key: a set of denied identities (absent = empty set)
--
-- Returns the status row {1, pttl, members} (luakit's reply convention): the key's PTTL in ms (-1 no
-- expiry, -2 absent) and every member in the server's order (the caller sorts). Writes nothing and changes no TTL. A key of another type is the
-- server's own WRONGTYPE error (raised by SMEMBERS).
-- Complexity: O(N) for N members.
local m = redis.call('SMEMBERS', KEYS[1])
return {1, redis.call('PTTL', KEYS[1]), m}
