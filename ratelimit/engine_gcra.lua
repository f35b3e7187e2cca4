-- engine_gcra: decide or migrate a GCRA limit (Generic Cell Rate Algorithm, virtual scheduling form).
--
-- KEYS[1]  the limiter's key: a string holding the theoretical arrival time (TAT) in server-time Unix
--          ms, expiring (PEXPIREAT) at the TAT, when the full burst is available again.
--
-- Decide:  ARGV = "d", n (>= 0; 0 probes one permit and writes nothing), burst, emission interval ms
--   With tat = max(stored TAT, now) and T the emission interval, n permits are allowed iff
--   tat + n*T - now <= burst*T; an allowed decision with n > 0 stores tat + n*T. Rejections write
--   nothing.
--   Returns {allowed, remaining, retryAfter, reset, 0, now}: remaining = floor((burst*T - debt)/T)
--   permits after the decision (>= 0) where debt = TAT - now; retryAfter ms until the whole batch
--   could be admitted (0 when allowed); reset = debt in ms; now the server time in ms.
--
-- Migrate: ARGV = "m", old emission interval ms, new emission interval ms
--   The debt (TAT - now, including a partial permit) is rescaled to debt*new/old, rounded up to
--   whole ms. Returns {1, now} when converted, {0, now} when the key is absent or has no debt (it
--   stays absent).
--
-- Errors (nothing written), the script's own codes (never a server code such as WRONGTYPE):
-- "RLFOREIGN ..." when the key holds anything but a TAT; "RLDEBT ..." when the rescaled debt exceeds
-- 9223372036854 ms (the time.Duration range).
-- Complexity: O(1).
-- ACL: luakit_acl (below) checks every command this script may run before anything else, so a
-- user the ACL refuses one of them gets NOPERM and nothing is written.
luakit_acl({'get', KEYS[1]}, {'time'})
if not (ARGV[1] == 'd' and ARGV[2] == '0') then -- a probe (n = 0, also run read-only) writes nothing
  luakit_acl({'set', KEYS[1]}, {'del', KEYS[1]})
end
local key = KEYS[1]
local maxDebt = 9223372036854

local v = redis.pcall('GET', key)
if type(v) == 'table' and v.err then
  if string.sub(v.err, 1, 9) ~= 'WRONGTYPE' then
    return v -- not a type clash (NOPERM...): the server's own error
  end
  return redis.error_reply('RLFOREIGN ratelimit key holds another type')
end
-- A stored value is the TAT alone, or (written by a keyed limiter) "TAT|version|g<burst>/<T>".
local tat, sver, sburst, sT = nil, nil, nil, nil
if v then
  local a = nil
  local bar = string.find(v, '|', 1, true)
  if not bar then
    a = string.match(v, '^(%d+)$')
  elseif ARGV[1] == 'k' and string.sub(v, bar) == '|' .. ARGV[3] .. '|' .. ARGV[4] then
    -- The keyed fast path: stored by these settings and version.
    a = string.sub(v, 1, bar - 1)
    sver, sburst, sT = tonumber(ARGV[3]), tonumber(ARGV[6]), tonumber(ARGV[7])
  end
  if not a and bar then
    local x, y, z
    a, x, y, z = string.match(v, '^(%d+)|(%d+)|g(%d+)/(%d+)$')
    if a then
      sver, sburst, sT = tonumber(x), tonumber(y), tonumber(z)
      if sT < 1 then
        a = nil
      end
    end
  end
  tat = a and tonumber(a)
  if not tat then
    return redis.error_reply('RLFOREIGN ratelimit key holds another limiter layout')
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- rescale returns debt (ms, > 0) rescaled from emission interval oldT to newT, rounded up; nil when
-- it exceeds maxDebt.
local function rescale(debt, oldT, newT)
  local q = math.floor(debt / oldT)
  local r = debt - q * oldT
  local scaled = q * newT
  if scaled > maxDebt then
    return nil
  end
  -- ceil(r*newT/oldT) by binary long multiplication: every intermediate stays below 3*oldT, exact
  -- in doubles, where r*newT itself could exceed 2^53.
  local bits, x = {}, newT
  while x > 0 do
    local bit = x % 2
    bits[#bits + 1] = bit
    x = (x - bit) / 2
  end
  local fq, fr = 0, 0
  for i = #bits, 1, -1 do
    fq, fr = fq * 2, fr * 2
    if fr >= oldT then
      fq, fr = fq + 1, fr - oldT
    end
    if bits[i] == 1 then
      fr = fr + r
      if fr >= oldT then
        fq, fr = fq + 1, fr - oldT
      end
    end
  end
  if fr > 0 then
    fq = fq + 1
  end
  scaled = scaled + fq
  if scaled > maxDebt then
    return nil
  end
  return scaled
end

-- decide decides n permits with burst and T; suffix (or nil) is appended to the stored TAT; store
-- writes the TAT even when rejected (never for a probe). Returns the reply.
local function decide(n, burst, T, suffix, store)
  if not tat or tat < now then
    tat = now
  end
  local want = n
  if want == 0 then
    want = 1
  end
  local cap = burst * T
  local after = tat + want * T
  local allowed, wait = 1, 0
  if after - now > cap then
    allowed, wait = 0, after - now - cap
  elseif n > 0 then
    tat = after
    store = true
  end
  if store and n > 0 then
    if tat > now then
      local at = string.format('%d', tat)
      local val = at
      if suffix then
        val = at .. suffix
      end
      redis.call('SET', key, val, 'PXAT', at)
    else
      redis.call('DEL', key)
    end
  end
  local rem = math.floor((cap - (tat - now)) / T)
  if rem < 0 then
    rem = 0
  end
  return {allowed, rem, wait, tat - now, 0, now, burst}
end

if ARGV[1] == 'd' then
  local r = decide(tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), nil, false)
  r[7] = nil
  return r
end

if ARGV[1] == 'k' then
  -- Keyed decide: ARGV = "k", n, version, own signature ("g<burst>/<T>"), fallback T ("0": none),
  -- burst, T.
  -- A TAT stored without settings is taken to hold the fallback interval (the own one without a
  -- fallback). A stored version above the own one is adopted (decided with the stored burst and
  -- interval, which stay stored); otherwise outstanding debt stored under another interval is
  -- rescaled to the own one as by "m", and stored with the decision even when rejected. Replies like
  -- "d", plus the burst applied.
  local n, ver, fbT = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[5])
  local burst, T = tonumber(ARGV[6]), tonumber(ARGV[7])
  local fromT = sT
  if not fromT then
    fromT = T
    if fbT > 0 then
      fromT = fbT
    end
  end
  local wver = sver or 0
  if sver and sver > ver and (sburst ~= burst or sT ~= T) then
    return decide(n, sburst, sT, '|' .. string.format('%d', sver) .. '|g' .. string.format('%d', sburst) .. '/' .. string.format('%d', sT), false)
  end
  local suffix = '|' .. ARGV[3] .. '|' .. ARGV[4]
  if wver > ver then
    suffix = '|' .. string.format('%d', wver) .. '|' .. ARGV[4]
  end
  local store = false
  if tat and tat > now and fromT ~= T then
    local scaled = rescale(tat - now, fromT, T)
    if not scaled then
      return redis.error_reply('RLDEBT ratelimit migrated GCRA debt out of range')
    end
    tat, store = now + scaled, true
  end
  return decide(n, burst, T, suffix, store)
end

-- Migration.
if not tat or tat <= now then
  return {0, now}
end
local scaled = rescale(tat - now, tonumber(ARGV[2]), tonumber(ARGV[3]))
if not scaled then
  return redis.error_reply('RLDEBT ratelimit migrated GCRA debt out of range')
end
local at = string.format('%d', now + scaled)
local val = at
if sver then
  val = at .. '|' .. string.format('%d', sver) .. '|g' .. string.format('%d', sburst) .. '/' .. string.format('%d', tonumber(ARGV[3]))
end
redis.call('SET', key, val, 'PXAT', at)
return {1, now}
