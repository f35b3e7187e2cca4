-- extend: reset the expiry of this owner's permit (renew it or change its lifetime), only while it is
-- active.
--
-- KEYS[1]  semaphore key (see acquire.lua for the layout)
-- ARGV[1]  owner token
-- ARGV[2]  new TTL in whole milliseconds (>= 1) counted from now on the server, or 0 for no expiry
-- ARGV[3]  optional, the permit's weight w (absent: 1): every member of the permit is renewed
--
-- Returns a status alone (luakit's reply convention): 1 the permit's expiry was reset, -1 this owner
-- holds no active permit (expired and pruned, released, or the key was deleted); the capacity is never
-- checked or changed.
-- Prunes expired permits and keeps the key's expiry at its latest permit's expiry.
-- O(log N + M + w log N).
-- ACL: TIME, ZREMRANGEBYSCORE, ZSCORE, ZADD, ZCARD, DEL, ZRANGE, PERSIST and PEXPIREAT. luakit_acl
-- (below) checks, before anything else, every command this script may run after its first write (the
-- ZREMRANGEBYSCORE pruning): a user the ACL refuses one of them gets NOPERM and nothing is written. A
-- refused TIME or ZREMRANGEBYSCORE would fail before any write (the server's NOPERM error), so they
-- are not checked: each check costs server time on every call.
luakit_acl({'zscore', KEYS[1]}, {'zadd', KEYS[1]}, {'zcard', KEYS[1]}, {'del', KEYS[1]},
  {'zrange', KEYS[1]}, {'persist', KEYS[1]}, {'pexpireat', KEYS[1]})
local key = KEYS[1]
local now = semaphore_prune(key)

local found = redis.call('ZSCORE', key, ARGV[1])
if found and ARGV[1] ~= '#capacity' then
  local ttl = tonumber(ARGV[2])
  local m = semaphore_members(ARGV[1], ARGV[3])
  if ttl == 0 then
    semaphore_score(key, m, 'inf', 'XX')
  else
    semaphore_score(key, m, string.format('%.0f', now + ttl), 'XX')
  end
end

if semaphore_empty(key) then
  redis.call('DEL', key)
else
  semaphore_expire(key)
end
if found and ARGV[1] ~= '#capacity' then
  return 1
end
return -1
