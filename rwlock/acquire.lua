-- acquire: take a read (shared) or write (exclusive) lease on one key if the mode is compatible with the
-- unexpired holders.
--
-- KEYS[1]  the lock key: a sorted set whose members are holder entries 'r:<owner>' (readers) or
--          'w:<owner>' (the writer), each scored by its expiry as server time in whole milliseconds
--          since the Unix epoch; the key itself expires with its latest entry
-- ARGV[1]  mode: 'r' (read) or 'w' (write)
-- ARGV[2]  owner token (opaque bytes)
-- ARGV[3]  lease TTL in whole milliseconds (>= 1), counted from now on the server
--
-- Expired entries (score <= now) are removed first. The remaining entries are either empty, readers
-- only, or one writer: a writer is added only to an empty set and a reader only when no writer holds it.
--
-- Returns a status row (luakit's reply convention), one of:
--   {1, ttl}   ok: acquired; ttl echoes ARGV[3]
--   {0, wait}  busy: not acquired (the entry was not written); wait is the ms until the conflicting
--              entries expire, if nobody renews them
--
-- O(log N + E) for N entries and E expired entries removed.
-- ACL: TIME, ZREMRANGEBYSCORE, ZCARD, ZRANGE, ZADD and PEXPIRE. luakit_acl (below) checks, before
-- anything else, every command this script may run after its first write (the ZREMRANGEBYSCORE
-- pruning): a user the ACL refuses one of them gets NOPERM and nothing is written. A refused TIME or
-- ZREMRANGEBYSCORE would fail before any write (the server's NOPERM error), so they are not checked:
-- each check costs server time on every call.
luakit_acl({'zcard', KEYS[1]}, {'zrange', KEYS[1]}, {'zadd', KEYS[1]}, {'pexpire', KEYS[1]})
local now = luakit_now_ms()
local key = KEYS[1]
local ttl = tonumber(ARGV[3])

redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%.0f', now))

local n = redis.call('ZCARD', key)
if n > 0 then
  local first = redis.call('ZRANGE', key, 0, 0)[1]
  if ARGV[1] == 'w' or string.sub(first, 1, 2) == 'w:' then
    -- Write needs an empty set; read needs no writer. Report when the blockers end.
    local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    return {0, tonumber(last[2]) - now}
  end
end

local expiry = now + ttl
redis.call('ZADD', key, string.format('%.0f', expiry), ARGV[1] .. ':' .. ARGV[2])
local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', key, string.format('%.0f', tonumber(last[2]) - now))
return {1, ttl}
