-- acquire: take a permit of weight w (w units of the capacity) if at least w units are free.
--
-- KEYS[1]  semaphore key: a sorted set of permits. Member = owner token, score = expiry in server-time
--          milliseconds since the Unix epoch (inf for a permit without expiry). The reserved member
--          "#capacity" stores the capacity as its negated score (-capacity), so pruning [0, now] never
--          removes it.
-- ARGV[1]  owner token (opaque bytes, never equal to "#capacity")
-- ARGV[2]  permit TTL in whole milliseconds (>= 1), or 0 for a permit that lasts until released
-- ARGV[3]  capacity (1 .. 2^53)
-- ARGV[4]  optional, the weight w (1 .. capacity; absent: 1): the permit is w members (see
--          semaphore_members in the semaphore's prelude), all scored alike
--
-- Returns a status row (luakit's reply convention), one of:
--   {1, active}        ok: acquired; active counts the units now held, this permit's w included
--   {0, active, wait}  busy: active (> capacity - w) units are held; wait is the earliest permit's
--                      remaining life in ms (>= 1: the first moment a permit can free up unless renewed),
--                      -1 when it has no expiry (then no permit has one); nothing but pruning was written
--   {-5, stored}       mismatch: permits are active under a different capacity (stored, a decimal
--                      string); nothing but pruning was written
--
-- Expired permits are pruned first (server time from TIME; effects replication, the default since
-- Redis 5 and the only mode since Redis 7, replicates the resulting writes, never the script). The key's
-- own expiry is kept at its latest permit's expiry (none when a permit has no expiry), so the key
-- vanishes when its last permit expires; it is deleted when no permit is left.
-- O(log N + M + w log N) for N units held, M pruned and weight w.
-- ACL: TIME, ZREMRANGEBYSCORE, ZSCORE, ZCARD, ZRANGE, ZADD, PERSIST and PEXPIREAT. luakit_acl (below)
-- checks, before anything else, every command this script may run after its first write (the
-- ZREMRANGEBYSCORE pruning): a user the ACL refuses one of them gets NOPERM and nothing is written. A
-- refused TIME or ZREMRANGEBYSCORE would fail before any write (the server's NOPERM error), so they
-- are not checked: each check costs server time on every call.
luakit_acl({'zscore', KEYS[1]}, {'zcard', KEYS[1]}, {'zrange', KEYS[1]}, {'zadd', KEYS[1]},
  {'persist', KEYS[1]}, {'pexpireat', KEYS[1]})
local key = KEYS[1]
local now = semaphore_prune(key)

local cap = tonumber(ARGV[3])
local stored = redis.call('ZSCORE', key, '#capacity')
local active = redis.call('ZCARD', key)
if stored then
  active = active - 1
  if active > 0 and -tonumber(stored) ~= cap then
    return {-5, string.format('%.0f', -tonumber(stored))}
  end
end
local m = semaphore_members(ARGV[1], ARGV[4])
if active + #m > cap then
  -- The earliest permit: the lowest score in [0, +inf] ("#capacity" is negative, pruned scores are gone).
  local first = redis.call('ZRANGE', key, 0, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
  local wait = -1
  if first[2] and first[2] ~= 'inf' and tonumber(first[2]) ~= math.huge then
    wait = tonumber(first[2]) - now
  end
  return {0, active, wait}
end

local ttl = tonumber(ARGV[2])
if ttl == 0 then
  semaphore_score(key, m, 'inf')
else
  semaphore_score(key, m, string.format('%.0f', now + ttl))
end
redis.call('ZADD', key, string.format('%.0f', -cap), '#capacity')

semaphore_expire(key)
return {1, active + #m}
