-- release: remove this owner's permit. Other owners' permits are never touched.
--
-- KEYS[1]  semaphore key (see acquire.lua for the layout)
-- ARGV[1]  owner token
-- ARGV[2]  optional, the permit's weight w (absent: 1): every member of the permit is removed
--
-- Returns a status alone (luakit's reply convention): 1 this call removed an active permit of this
-- owner, -1 it holds none (expired and pruned, already released, or the key was deleted). Prunes expired permits, deletes the key when no
-- permit is left, and otherwise keeps the key's expiry at its latest permit's expiry.
-- O(log N + M + w log N).
-- ACL: TIME, ZREMRANGEBYSCORE, ZREM, ZCARD, ZSCORE, DEL, ZRANGE, PERSIST and PEXPIREAT. luakit_acl
-- (below) checks, before anything else, every command this script may run after its first write (the
-- ZREMRANGEBYSCORE pruning): a user the ACL refuses one of them gets NOPERM and nothing is written. A
-- refused TIME or ZREMRANGEBYSCORE would fail before any write (the server's NOPERM error), so they
-- are not checked: each check costs server time on every call.
luakit_acl({'zrem', KEYS[1]}, {'zcard', KEYS[1]}, {'zscore', KEYS[1]}, {'del', KEYS[1]},
  {'zrange', KEYS[1]}, {'persist', KEYS[1]}, {'pexpireat', KEYS[1]})
local key = KEYS[1]
semaphore_prune(key)

local removed = 0
if ARGV[1] ~= '#capacity' then
  local m = semaphore_members(ARGV[1], ARGV[2])
  for i = 1, #m, 512 do
    removed = removed + redis.call('ZREM', key, unpack(m, i, math.min(i + 511, #m)))
  end
end

if semaphore_empty(key) then
  redis.call('DEL', key)
elseif removed > 0 then
  semaphore_expire(key)
end
if removed > 0 then
  return 1
end
return -1
