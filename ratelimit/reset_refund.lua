-- reset_refund: delete a limiter's state (Reset) or give permits back (Refund).
--
-- KEYS[1]  the limiter's key (see engine_gcra.lua and engine_components.lua for the layouts)
--
-- Reset:  ARGV = "x", layout ("g" for GCRA, or the hash layout tag "fw", "tb", "sw", "cp")
--   Deletes the key when it holds that layout; returns 1 when deleted, -1 when absent.
-- Refund: ARGV = "r", n (> 0), then for GCRA: "g", emission interval µs; for a hash: tag, signature
--   ("" for standalone), k, then k groups: kind ("f" or "t"), limit
--   GCRA: TAT = max(now, TAT - n*T) (deleted when no debt is left). Fixed window: the current
--   window's count drops by n (not below 0). Token bucket: the tokens rise by n (not above the
--   limit). The expiry is left as it is (it may outlive the state's return to full, harmlessly:
--   every decision settles at full capacity). Returns 1 when state changed, -1 when absent or
--   nothing was owed.
--
-- A keyed refund appends "k", own signature: state stored under another signature (not yet
-- converted by a keyed decision) is refunded nothing (returns -5, mismatch), and never an RLMISMATCH.
-- Every reply is a status alone (luakit's reply convention).
--
-- Times are µs (server TIME); a refunded hash keeps its times (only counts change).
--
-- Errors (nothing written): "RLFOREIGN ..." when the key holds another type or layout, or a value
-- not in the storage format (a GCRA value without the "u" marker, a hash without the "U" field);
-- "RLMISMATCH ..." when a composite's stored signature differs.
-- Complexity: O(k) for a refund of k components, O(1) for GCRA; a reset is one DEL.
-- ACL: luakit_acl (below) checks every command this script may run before anything else, so a
-- user the ACL refuses one of them gets NOPERM and nothing is written.
luakit_acl({'time'}, {'type', KEYS[1]}, {'get', KEYS[1]}, {'del', KEYS[1]}, {'set', KEYS[1]},
  {'hget', KEYS[1]}, {'hset', KEYS[1]})
local key = KEYS[1]
local now = luakit_now_us()
local layout = ARGV[1] == 'x' and ARGV[2] or ARGV[3]

local typ = redis.call('TYPE', key).ok
if typ == 'none' then
  return -1
end
if layout == 'g' then
  if typ ~= 'string' then
    return redis.error_reply('RLFOREIGN ratelimit key holds another type')
  end
  local v = redis.call('GET', key)
  if string.byte(v, 1) ~= 117 then -- not "u"
    return redis.error_reply('RLFOREIGN ratelimit key holds another limiter layout')
  end
  local body = string.sub(v, 2)
  local a, sv, sb, sT = string.match(body, '^(%d+)$'), nil, nil, nil
  if not a then
    a, sv, sb, sT = string.match(body, '^(%d+)|(%d+)|g(%d+)/(%d+)$')
  end
  if not a then
    return redis.error_reply('RLFOREIGN ratelimit key holds another limiter layout')
  end
  if ARGV[1] == 'x' then
    return redis.call('DEL', key)
  end
  local tat = tonumber(a)
  local suffix = ''
  if sv then
    suffix = '|' .. sv .. '|g' .. sb .. '/' .. sT
    if ARGV[5] == 'k' and 'g' .. sb .. '/' .. sT ~= ARGV[6] then
      return -5
    end
  end
  if tat <= now then
    return -1
  end
  tat = tat - tonumber(ARGV[2]) * tonumber(ARGV[4])
  if tat <= now then
    redis.call('DEL', key)
  else
    local at = string.format('%d', tat)
    local ms = (tat - tat % 1000) / 1000
    if tat % 1000 > 0 then
      ms = ms + 1
    end
    redis.call('SET', key, 'u' .. at .. suffix, 'PXAT', string.format('%d', ms))
  end
  return 1
end
if typ ~= 'hash' then
  return redis.error_reply('RLFOREIGN ratelimit key holds another type')
end
if redis.call('HGET', key, 'L') ~= layout then
  return redis.error_reply('RLFOREIGN ratelimit key holds another limiter layout')
end
if not redis.call('HGET', key, 'U') then
  return redis.error_reply('RLFOREIGN ratelimit key holds another storage format')
end
if ARGV[1] == 'x' then
  return redis.call('DEL', key)
end
local n = tonumber(ARGV[2])
local k = tonumber(ARGV[5])
local tail = 6 + 2 * k
if ARGV[tail] == 'k' then
  local stored = redis.call('HGET', key, 'S')
  if stored and stored ~= ARGV[tail + 1] then
    return -5
  end
elseif ARGV[4] ~= '' then
  if redis.call('HGET', key, 'S') ~= ARGV[4] then
    return redis.error_reply('RLMISMATCH ratelimit stored composite configuration differs')
  end
end
local changed = -1
local j = 6
for i = 1, k do
  local kind, limit = ARGV[j], tonumber(ARGV[j + 1])
  local p = tostring(i - 1)
  if kind == 'f' then
    local e = tonumber(redis.call('HGET', key, p .. '.e'))
    local c = tonumber(redis.call('HGET', key, p .. '.n'))
    if e and c and e > now and c > 0 then
      c = c - n
      if c < 0 then
        c = 0
      end
      redis.call('HSET', key, p .. '.n', string.format('%d', c))
      changed = 1
    end
  else
    local tk = tonumber(redis.call('HGET', key, p .. '.t'))
    if tk and tk < limit then
      tk = tk + n
      if tk > limit then
        tk = limit
      end
      redis.call('HSET', key, p .. '.t', string.format('%d', tk))
      changed = 1
    end
  end
  j = j + 2
end
return changed
