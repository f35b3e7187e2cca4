-- force_release: delete a lock's lease whoever holds it (an operator's action), leaving the fence key.
--
-- KEYS[1]  lease key (a string holding the owner token, with a PX expiry)
--
-- Returns a status alone (luakit's reply convention): 1 the lease key was deleted, -1 it was absent
-- (nothing written), -3 it holds another Redis type (foreign data, left alone). The fence counter is never touched, so the next holder's fencing
-- token is still higher than every earlier one. O(1).
-- ACL: TYPE and DEL. DEL is the only write and the last command, so a user the ACL refuses one of them
-- gets the server's NOPERM error and nothing is written: no luakit_acl check is needed.
local s = luakit_type(KEYS[1], 'string')
if s ~= 1 then
  return s
end
redis.call('DEL', KEYS[1])
return 1
