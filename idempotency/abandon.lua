-- abandon: remove a pending claim, for its current owner only.
--
-- KEYS[1]  claim hash (fields as in begin.lua)
-- ARGV[1]  owner token
-- ARGV[2]  generation (decimal string, as begin returned it)
--
-- Returns 1 when the claim was pending with this owner token and generation and was deleted; 0
-- otherwise (absent, expired, completed, another owner or generation), writing nothing; -1 when the
-- key holds another Redis type (data this package did not write), writing nothing. O(1).
-- ACL: TYPE, HMGET and DEL. DEL is the only write and the last command, so a user the ACL refuses one
-- of them gets the server's NOPERM error and nothing is written: no luakit_acl check is needed.
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  return 0
end
if kind ~= 'hash' then
  return -1
end
local h = redis.call('HMGET', KEYS[1], 's', 't', 'g')
if h[1] ~= 'p' or h[2] ~= ARGV[1] or h[3] ~= ARGV[2] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
