-- fence: raise this node's fence counter to the new fencing token (set-if-greater), only while the
-- caller still holds the lock on this node.
--
-- KEYS[1]  lock key
-- KEYS[2]  fence key
-- ARGV[1]  owner token
-- ARGV[2]  new fencing token, canonical decimal int64 (positive)
--
-- Returns 1 when the counter now holds a value >= ARGV[2] (written, or already at least that),
-- 0 when the caller no longer holds the lock on this node (nothing written), or a reason string when the
-- fence key is unusable ("wrongtype", "expiring", "malformed"; nothing written). O(1).
--
-- Values are compared as decimal strings of equal canonical form (length, then bytes), never as Lua
-- numbers, so tokens above 2^53 compare exactly.
-- ACL: GET, TYPE, SET, PTTL and GET. A call writes at most once (one SET of the fence key), as its
-- last command, so a user the ACL refuses one of them gets the server's NOPERM error and nothing is
-- written: no luakit_acl check is needed.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local t = redis.call('TYPE', KEYS[2])
if type(t) == 'table' then t = t['ok'] end
if t == 'none' then
  redis.call('SET', KEYS[2], ARGV[2])
  return 1
end
if t ~= 'string' then
  return 'wrongtype'
end
if redis.call('PTTL', KEYS[2]) ~= -1 then
  return 'expiring'
end
local cur = redis.call('GET', KEYS[2])
if not string.match(cur, '^%d+$') or (#cur > 1 and string.sub(cur, 1, 1) == '0') then
  return 'malformed'
end
if #ARGV[2] > #cur or (#ARGV[2] == #cur and ARGV[2] > cur) then
  redis.call('SET', KEYS[2], ARGV[2])
end
return 1
