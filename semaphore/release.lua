-- release: remove this owner's permit. Other owners' permits are never touched.
--
-- KEYS[1]  semaphore key (see acquire.lua for the layout)
-- ARGV[1]  owner token
--
-- Returns 1 when this call removed an active permit of this owner, 0 when it holds none (expired and
-- pruned, already released, or the key was deleted). Prunes expired permits, deletes the key when no
-- permit is left, and otherwise keeps the key's expiry at its latest permit's expiry. O(log N + M).
-- ACL: TIME, ZREMRANGEBYSCORE, ZREM, ZCARD, ZSCORE, DEL, ZRANGE, PERSIST and PEXPIREAT. luakit_acl
-- (below) checks, before anything else, every command this script may run after its first write (the
-- ZREMRANGEBYSCORE pruning): a user the ACL refuses one of them gets NOPERM and nothing is written. A
-- refused TIME or ZREMRANGEBYSCORE would fail before any write (the server's NOPERM error), so they
-- are not checked: each check costs server time on every call.
luakit_acl({'zrem', KEYS[1]}, {'zcard', KEYS[1]}, {'zscore', KEYS[1]}, {'del', KEYS[1]},
  {'zrange', KEYS[1]}, {'persist', KEYS[1]}, {'pexpireat', KEYS[1]})
local key = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', key, 0, now)

local removed = 0
if ARGV[1] ~= '#capacity' then
  removed = redis.call('ZREM', key, ARGV[1])
end

local n = redis.call('ZCARD', key)
if n == 0 or (n == 1 and redis.call('ZSCORE', key, '#capacity')) then
  redis.call('DEL', key)
elseif removed == 1 then
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if top[2] == 'inf' or tonumber(top[2]) == math.huge then
    redis.call('PERSIST', key)
  else
    redis.call('PEXPIREAT', key, string.format('%.0f', tonumber(top[2])))
  end
end
return removed
