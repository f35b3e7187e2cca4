-- verify: report whether this owner holds the lock on this node, without changing anything.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner token
--
-- Returns a status alone (luakit's reply convention): 1 the lock key holds the owner token, -1 it is
-- absent, -2 it holds another owner's token (nothing written). O(1).
return luakit_owner(KEYS[1], ARGV[1])
