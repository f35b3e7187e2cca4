-- release: delete the lock on this node, only for its current owner. The fence counter is never touched.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner token
--
-- Returns a status alone (luakit's reply convention): 1 deleted, -1 no lock exists, -2 another owner
-- holds it (nothing written). O(1).
-- ACL: GET and DEL. DEL is the only write and the last command, so a user the ACL refuses one of them
-- gets the server's NOPERM error and nothing is written: no luakit_acl check is needed.
return luakit_del_owned(KEYS[1], ARGV[1])
