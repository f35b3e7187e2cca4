-- force_release: delete a lock's lease whoever holds it (an operator's action), leaving the fence key.
--
-- KEYS[1]  lease key (a string holding the owner token, with a PX expiry)
--
-- Returns 1 when the lease key was deleted, 0 when it was absent (nothing written), -1 when it holds
-- another Redis type (left alone). The fence counter is never touched, so the next holder's fencing
-- token is still higher than every earlier one. O(1).
-- ACL: TYPE and DEL. DEL is the only write and the last command, so a user the ACL refuses one of them
-- gets the server's NOPERM error and nothing is written: no luakit_acl check is needed.
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then
  return 0
end
if t ~= 'string' then
  return -1
end
return redis.call('DEL', KEYS[1])
