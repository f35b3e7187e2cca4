-- verify: report whether one holder entry exists unexpired, at one instant. Read-only.
--
-- KEYS[1]  the lock key (sorted set of holder entries scored by expiry in server-time ms)
-- ARGV[1]  the holder entry: 'r:<owner>' or 'w:<owner>'
--
-- Returns the entry's remaining life in ms (>= 1) when it is held, else -2. O(1).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then
  return -2
end
local left = tonumber(score) - now
if left <= 0 then
  return -2
end
return left
