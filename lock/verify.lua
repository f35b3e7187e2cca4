-- verify: report whether the owner still holds the lease, at one instant. Read-only.
--
-- KEYS[1]  lease key
-- ARGV[1]  owner token
--
-- Returns a status alone (luakit's reply convention): 1 the owner holds the lease, -1 no lease exists,
-- -2 another owner holds it. O(1).
return luakit_owner(KEYS[1], ARGV[1])
