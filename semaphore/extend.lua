-- extend: reset the expiry of this owner's permit (renew it or change its lifetime), only while it is
-- active.
--
-- KEYS[1]  semaphore key (see acquire.lua for the layout)
-- ARGV[1]  owner token
-- ARGV[2]  new TTL in whole milliseconds (>= 1) counted from now on the server, or 0 for no expiry
--
-- Returns 1 when the permit's expiry was reset, 0 when this owner holds no active permit (expired and
-- pruned, released, or the key was deleted); the capacity is never checked or changed.
-- Prunes expired permits and keeps the key's expiry at its latest permit's expiry. O(log N + M).
-- ACL: TIME, ZREMRANGEBYSCORE, ZSCORE, ZADD, ZCARD, DEL, ZRANGE, PERSIST and PEXPIREAT. luakit_acl
-- (below) checks, before anything else, every command this script may run after its first write (the
-- ZREMRANGEBYSCORE pruning): a user the ACL refuses one of them gets NOPERM and nothing is written. A
-- refused TIME or ZREMRANGEBYSCORE would fail before any write (the server's NOPERM error), so they
-- are not checked: each check costs server time on every call.
luakit_acl({'zscore', KEYS[1]}, {'zadd', KEYS[1]}, {'zcard', KEYS[1]}, {'del', KEYS[1]},
  {'zrange', KEYS[1]}, {'persist', KEYS[1]}, {'pexpireat', KEYS[1]})
local key = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', key, 0, now)

local found = redis.call('ZSCORE', key, ARGV[1])
if found and ARGV[1] ~= '#capacity' then
  local ttl = tonumber(ARGV[2])
  if ttl == 0 then
    redis.call('ZADD', key, 'XX', 'inf', ARGV[1])
  else
    redis.call('ZADD', key, 'XX', string.format('%.0f', now + ttl), ARGV[1])
  end
end

local n = redis.call('ZCARD', key)
if n == 0 or (n == 1 and redis.call('ZSCORE', key, '#capacity')) then
  redis.call('DEL', key)
else
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if top[2] == 'inf' or tonumber(top[2]) == math.huge then
    redis.call('PERSIST', key)
  else
    redis.call('PEXPIREAT', key, string.format('%.0f', tonumber(top[2])))
  end
end
if found and ARGV[1] ~= '#capacity' then
  return 1
end
return 0
