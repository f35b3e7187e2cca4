-- force_abandon: remove a pending claim of a given generation whoever owns it (an operator's action for
-- a stuck claim).
--
-- KEYS[1]  claim hash (fields as in begin.lua)
-- ARGV[1]  generation (decimal string, as Inspect reported it)
--
-- Returns a status alone (luakit's reply convention, idem_pending's statuses): 1 the claim was pending
-- with this generation and was deleted; otherwise, writing nothing, -1 absent (expired, abandoned), -2
-- completed or another generation's, -3 the key holds another Redis type. A completed result is never
-- removed. O(1).
-- ACL: TYPE, HMGET and DEL. DEL is the only write and the last command, so a user the ACL refuses one
-- of them gets the server's NOPERM error and nothing is written: no luakit_acl check is needed.
local s = idem_pending(KEYS[1], nil, ARGV[1])
if s ~= 1 then
  return s
end
redis.call('DEL', KEYS[1])
return 1
