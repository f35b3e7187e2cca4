-- force_abandon: remove a pending claim of a given generation whoever owns it (an operator's action for
-- a stuck claim).
--
-- KEYS[1]  claim hash (fields as in begin.lua)
-- ARGV[1]  generation (decimal string, as Inspect reported it)
--
-- Returns 1 when the claim was pending with this generation and was deleted; 0 otherwise (absent,
-- expired, completed, another generation), writing nothing; -1 when the key holds another Redis type,
-- writing nothing. A completed result is never removed. O(1).
-- ACL: TYPE, HMGET and DEL. DEL is the only write and the last command, so a user the ACL refuses one
-- of them gets the server's NOPERM error and nothing is written: no luakit_acl check is needed.
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  return 0
end
if kind ~= 'hash' then
  return -1
end
local h = redis.call('HMGET', KEYS[1], 's', 'g')
if h[1] ~= 'p' or h[2] ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
