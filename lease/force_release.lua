-- force_release: delete one named lease of a hash whoever holds it (an operator's action).
--
-- KEYS[1]  hash key
-- ARGV[1]  field (the lease name)
--
-- Returns a status alone (luakit's reply convention): 1 the field was deleted, -1 it was absent
-- (nothing written), -3 the key holds another Redis type (foreign data, left alone). Other fields and their expiries are untouched. O(1).
-- ACL: TYPE and HDEL. HDEL is the only write and the last command, so a user the ACL refuses one of
-- them gets the server's NOPERM error and nothing is written: no luakit_acl check is needed.
local s = luakit_type(KEYS[1], 'hash')
if s ~= 1 then
  return s
end
if redis.call('HDEL', KEYS[1], ARGV[1]) == 1 then
  return 1
end
return -1
