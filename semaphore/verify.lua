-- verify: report whether this owner holds an active permit, at one instant.
--
-- KEYS[1]  semaphore key (see acquire.lua for the layout)
-- ARGV[1]  owner token
--
-- Returns a status alone (luakit's reply convention): 1 this owner holds an active permit, -1 it holds
-- none. Not read-only: it prunes expired permits first (and deletes the key when none is
-- left), so it must run on the primary with write permission. O(log N + M).
-- ACL: TIME, ZREMRANGEBYSCORE, ZCARD, ZSCORE and DEL. luakit_acl (below) checks, before anything else,
-- every command this script may run after its first write (the ZREMRANGEBYSCORE pruning): a user the
-- ACL refuses one of them gets NOPERM and nothing is written. A refused TIME or ZREMRANGEBYSCORE would
-- fail before any write (the server's NOPERM error), so they are not checked: each check costs server
-- time on every call.
luakit_acl({'zcard', KEYS[1]}, {'zscore', KEYS[1]}, {'del', KEYS[1]})
local key = KEYS[1]
semaphore_prune(key)
if redis.call('ZCARD', key) == 1 and redis.call('ZSCORE', key, '#capacity') then
  redis.call('DEL', key)
end

if ARGV[1] == '#capacity' or not redis.call('ZSCORE', key, ARGV[1]) then
  return -1
end
return 1
