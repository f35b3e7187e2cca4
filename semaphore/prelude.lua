-- The semaphore's prelude: functions its scripts share. luakit.MustLoad puts in front of each script
-- the ones it calls (see luakit.Prelude); no script runs this file on its own. KEYS[1] is always the
-- semaphore key (see acquire.lua for the layout).

-- semaphore_prune removes the permits that expired by the server time now (ms), and returns now.
local function semaphore_prune(key)
  local now = luakit_now_ms()
  redis.call('ZREMRANGEBYSCORE', key, 0, now)
  return now
end

-- semaphore_empty reports whether key holds no permit: absent, or only the "#capacity" member.
local function semaphore_empty(key)
  local n = redis.call('ZCARD', key)
  return n == 0 or (n == 1 and redis.call('ZSCORE', key, '#capacity') ~= false)
end

-- semaphore_expire keeps the key's own expiry at its latest permit's: PERSIST when that permit has no
-- expiry (score inf), else PEXPIREAT its score.
local function semaphore_expire(key)
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if top[2] == 'inf' or tonumber(top[2]) == math.huge then
    redis.call('PERSIST', key)
  else
    redis.call('PEXPIREAT', key, string.format('%.0f', tonumber(top[2])))
  end
end
