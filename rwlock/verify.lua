-- verify: report whether one holder entry exists unexpired, at one instant. Read-only.
--
-- KEYS[1]  the lock key (sorted set of holder entries scored by expiry in server-time ms)
-- ARGV[1]  the holder entry: 'r:<owner>' or 'w:<owner>'
--
-- Returns a status alone (luakit's reply convention): 1 the entry is held unexpired, -1 it is absent or
-- expired. O(1).
local now = luakit_now_ms()
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) <= now then
  return -1
end
return 1
