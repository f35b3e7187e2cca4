-- release: remove one holder entry; other holders' entries are never touched.
--
-- KEYS[1]  the lock key (sorted set of holder entries scored by expiry in server-time ms)
-- ARGV[1]  the holder entry: 'r:<owner>' or 'w:<owner>'
--
-- Expired entries are removed first (so an expired entry counts as absent); an emptied set is deleted,
-- otherwise the key's expiry is moved to its latest entry.
-- Returns a status alone (luakit's reply convention): 1 this call removed the unexpired entry, -1 it
-- was absent or expired. O(log N + E).
-- ACL: TIME, ZREMRANGEBYSCORE, ZREM, ZRANGE and PEXPIRE. luakit_acl (below) checks, before anything
-- else, every command this script may run after its first write (the ZREMRANGEBYSCORE pruning): a user
-- the ACL refuses one of them gets NOPERM and nothing is written. A refused TIME or ZREMRANGEBYSCORE
-- would fail before any write (the server's NOPERM error), so they are not checked: each check costs
-- server time on every call.
luakit_acl({'zrem', KEYS[1]}, {'zrange', KEYS[1]}, {'pexpire', KEYS[1]})
local now = luakit_now_ms()
local key = KEYS[1]

redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%.0f', now))
local removed = redis.call('ZREM', key, ARGV[1])
local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
if last[2] then
  redis.call('PEXPIRE', key, string.format('%.0f', tonumber(last[2]) - now))
end
if removed == 1 then
  return 1
end
return -1
