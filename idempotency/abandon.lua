-- abandon: remove a pending claim, for its current owner only.
--
-- KEYS[1]  claim hash (fields as in begin.lua)
-- ARGV[1]  owner token
-- ARGV[2]  generation (decimal string, as begin returned it)
--
-- Returns a status alone (luakit's reply convention, idem_pending's statuses): 1 the claim was pending
-- with this owner token and generation and was deleted; otherwise, writing nothing, -1 absent
-- (expired, abandoned), -2 completed or another owner's or generation's, -3 the key holds another
-- Redis type (data this package did not write). O(1).
-- ACL: TYPE, HMGET and DEL. DEL is the only write and the last command, so a user the ACL refuses one
-- of them gets the server's NOPERM error and nothing is written: no luakit_acl check is needed.
local s = idem_pending(KEYS[1], ARGV[1], ARGV[2])
if s ~= 1 then
  return s
end
redis.call('DEL', KEYS[1])
return 1
