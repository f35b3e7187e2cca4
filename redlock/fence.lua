-- fence: raise this node's fence counter to the new fencing token (set-if-greater), only while the
-- caller still holds the lock on this node.
--
-- KEYS[1]  lock key
-- KEYS[2]  fence key
-- ARGV[1]  owner token
-- ARGV[2]  new fencing token, canonical decimal int64 (positive)
--
-- Returns a status (luakit's reply convention): 1 when the counter now holds a value >= ARGV[2]
-- (written, or already at least that); -1 (absent) or -2 (another owner) when the caller no longer
-- holds the lock on this node (nothing written); {-4, reason} when the fence key is unusable
-- (luakit_fence_read's reasons: "wrongtype", "expiring", "negative", "malformed"; nothing written).
-- O(1).
--
-- Values are compared as decimal strings of equal canonical form (length, then bytes), never as Lua
-- numbers, so tokens above 2^53 compare exactly.
-- ACL: GET, TYPE, PTTL, GET and SET. A call writes at most once (one SET of the fence key), as its
-- last command, so a user the ACL refuses one of them gets the server's NOPERM error and nothing is
-- written: no luakit_acl check is needed.
local s = luakit_owner(KEYS[1], ARGV[1])
if s ~= 1 then
  return s
end
local cur, reason = luakit_fence_read(KEYS[2])
if not cur then
  return {-4, reason}
end
if #ARGV[2] > #cur or (#ARGV[2] == #cur and ARGV[2] > cur) then
  redis.call('SET', KEYS[2], ARGV[2])
end
return 1
