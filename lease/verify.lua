-- verify: report whether the owner still holds the named lease, at one instant. Read-only.
--
-- KEYS[1]  hash key
-- ARGV[1]  field
-- ARGV[2]  owner token
--
-- Returns a status alone (luakit's reply convention): 1 the owner holds the field, -1 the field does
-- not exist, -2 another owner holds it. O(1).
return luakit_owner(KEYS[1], ARGV[2], ARGV[1])
