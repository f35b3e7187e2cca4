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

-- semaphore_members returns the sorted-set members of owner's permit of weight w (ARGV, absent: 1):
-- the owner token for the first unit, then '<owner>:2' ... '<owner>:w' (owner tokens are hex, so no
-- member of one permit is another's), every unit scored alike so that they expire and are pruned
-- together.
local function semaphore_members(owner, w)
  local n = tonumber(w or '1')
  local m = {owner}
  for i = 2, n do
    m[i] = owner .. ':' .. i
  end
  return m
end

-- semaphore_score sets the score of every member of m to score, adding them (flag nil) or only
-- updating existing ones (flag 'XX'), in batches that stay within Lua's stack limit.
local function semaphore_score(key, m, score, flag)
  local args = {}
  for i = 1, #m do
    args[#args + 1] = score
    args[#args + 1] = m[i]
    if #args == 512 or i == #m then
      if flag then
        redis.call('ZADD', key, flag, unpack(args))
      else
        redis.call('ZADD', key, unpack(args))
      end
      args = {}
    end
  end
end
