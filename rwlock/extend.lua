-- extend: restart one holder entry's expiry at the full TTL, only while that entry exists unexpired.
-- Other entries keep their own expiries.
--
-- KEYS[1]  the lock key (sorted set of holder entries scored by expiry in server-time ms)
-- ARGV[1]  the holder entry: 'r:<owner>' or 'w:<owner>'
-- ARGV[2]  TTL in whole milliseconds (>= 1), counted from now on the server
--
-- Expired entries are removed first; the key's expiry is moved to its latest entry.
-- Returns a status alone (luakit's reply convention): 1 renewed, -1 the entry is absent or expired
-- (nothing renewed). O(log N + E).
-- ACL: TIME, ZREMRANGEBYSCORE, ZSCORE, ZADD, ZRANGE and PEXPIRE. luakit_acl (below) checks, before
-- anything else, every command this script may run after its first write (the ZREMRANGEBYSCORE
-- pruning): a user the ACL refuses one of them gets NOPERM and nothing is written. A refused TIME or
-- ZREMRANGEBYSCORE would fail before any write (the server's NOPERM error), so they are not checked:
-- each check costs server time on every call.
luakit_acl({'zscore', KEYS[1]}, {'zadd', KEYS[1]}, {'zrange', KEYS[1]}, {'pexpire', KEYS[1]})
local now = luakit_now_ms()
local key = KEYS[1]

redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%.0f', now))
if not redis.call('ZSCORE', key, ARGV[1]) then
  return -1
end
redis.call('ZADD', key, 'XX', string.format('%.0f', now + tonumber(ARGV[2])), ARGV[1])
local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', key, string.format('%.0f', tonumber(last[2]) - now))
return 1
