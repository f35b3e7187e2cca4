-- engine_gcra: decide or migrate a GCRA limit (Generic Cell Rate Algorithm, virtual scheduling form).
--
-- Every time is a whole number of microseconds (server TIME: seconds and microseconds): the server
-- time now, the emission interval T and the TAT. Lua doubles hold them exactly: Go rejects settings
-- whose Burst*T exceeds 2^51 µs, so every sum below stays under 2^53.
--
-- KEYS[1]  the limiter's key: a string "u<TAT>" (TAT in server-time Unix µs) or, written by a keyed
--          limiter, "u<TAT>|version|g<burst>/<T>" (T in µs), expiring (PEXPIREAT, whole ms rounded
--          up) at the TAT, when the full burst is available again. Any other value (one without the
--          "u" included) is foreign data: RLFOREIGN, nothing written.
--
-- Decide:  ARGV = "d", n (>= 0; 0 probes one permit and writes nothing), burst, emission interval µs
--   With tat = max(stored TAT, now) and T the emission interval, n permits are allowed iff
--   tat + n*T - now <= burst*T; an allowed decision with n > 0 stores tat + n*T. Rejections write
--   nothing.
--   Returns a status row (luakit's reply convention) {status, remaining, retryAfter, reset, 0, now}:
--   status 1 allowed, 0 rejected (busy), -1 (absent) for a probe (n = 0) of an absent key, which is
--   allowed; remaining = floor((burst*T - debt)/T) permits after the decision (>= 0) where
--   debt = TAT - now; retryAfter µs until the whole batch could be admitted (0 when allowed);
--   reset = debt in µs; now the server time in µs.
--
-- Keyed decide: ARGV = own suffix ("|<version>|g<burst>/<T>", T in µs), n, burst, T[, fallback T]:
--   as Decide, for state that records its settings (see the "k" branch below).
--
-- Migrate: ARGV = "m", old emission interval µs, new emission interval µs
--   The debt (TAT - now, including a partial permit) is rescaled to debt*new/old, rounded up to
--   whole µs. Returns a status row (luakit's reply convention): {1, now} when converted, {-1, now}
--   (absent) when the key is absent or has no debt (it stays absent).
--
-- Errors (nothing written), the script's own codes (never a server code such as WRONGTYPE):
-- "RLFOREIGN ..." when the key holds anything but a TAT in the form above; "RLDEBT ..." when the
-- rescaled debt exceeds 2^51 µs.
-- Complexity: O(1).
-- ACL: GET, TIME, SET and DEL. A call writes at most once (one SET or one DEL, a probe never), after
-- its reads, so a user the ACL refuses one of them gets the server's NOPERM error and nothing is
-- written: no luakit_acl check is needed (each check would cost server time on every call).
local key = KEYS[1]
local maxDebt = 2251799813685248 -- 2^51 µs
-- The keyed form has no mode argument: its ARGV[1] is its suffix, the only first argument other
-- than "d" and "m" (one argument fewer costs the server about 0.1 µs per call).
local mode = ARGV[1]
if mode ~= 'd' and mode ~= 'm' then
  mode = 'k'
end

local v = redis.pcall('GET', key)
if type(v) == 'table' and v.err then
  if string.sub(v.err, 1, 9) ~= 'WRONGTYPE' then
    return v -- not a type clash (NOPERM...): the server's own error
  end
  return redis.error_reply('RLFOREIGN ratelimit key holds another type')
end
-- A stored value is "u" and the TAT alone, or (written by a keyed limiter)
-- "uTAT|version|g<burst>/<T>". The fast paths (a plain "uTAT" for "d", this keyed limiter's own
-- suffix for the keyed form) read the TAT with one substring (and a search or a comparison) and no
-- pattern.
local tat, sver, sburst, sT, fast = nil, nil, nil, nil, false
if v then
  if string.byte(v, 1) ~= 117 then -- not "u"
    return redis.error_reply('RLFOREIGN ratelimit key holds another limiter layout')
  end
  if mode == 'k' then
    local sl = #ARGV[1]
    if string.sub(v, -sl) == ARGV[1] then
      fast = true
      tat = tonumber(string.sub(v, 2, -sl - 1))
    end
  elseif not string.find(v, '|', 2, true) then
    fast = true
    tat = tonumber(string.sub(v, 2))
  end
  if fast and not (tat and tat >= 0 and tat % 1 == 0) then
    return redis.error_reply('RLFOREIGN ratelimit key holds another limiter layout')
  end
  if not fast then
    local body, a = string.sub(v, 2), nil
    if not string.find(v, '|', 2, true) then
      a = string.match(body, '^(%d+)$')
    else
      local x, y, z
      a, x, y, z = string.match(body, '^(%d+)|(%d+)|g(%d+)/(%d+)$')
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
end
local now = luakit_now_us()

-- rescale returns debt (µs, > 0) rescaled from emission interval oldT to newT, rounded up; nil when
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

-- put stores the TAT (µs, > now) with suffix (or nil), expiring at the TAT rounded up to whole ms.
local function put(suffix)
  local at = string.format('%d', tat)
  local val
  if suffix then
    val = 'u' .. at .. suffix -- one concatenation, one new string
  else
    val = 'u' .. at
  end
  local ms = (tat - tat % 1000) / 1000
  if tat % 1000 > 0 then
    ms = ms + 1
  end
  redis.call('SET', key, val, 'PXAT', string.format('%d', ms))
end

-- decide decides n permits with burst and T; suffix (or nil) is appended to the stored TAT; store
-- writes the TAT even when rejected (never for a probe). Returns the reply: status -1 (absent) for a
-- probe of an absent key.
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
      put(suffix)
    else
      redis.call('DEL', key)
    end
  end
  local rem = math.floor((cap - (tat - now)) / T)
  if rem < 0 then
    rem = 0
  end
  if n == 0 and not v then
    allowed = -1
  end
  return {allowed, rem, wait, tat - now, 0, now, burst}
end

if mode == 'd' then
  local r = decide(tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), nil, false)
  r[7] = nil
  return r
end

if mode == 'k' then
  -- Keyed decide: ARGV = own suffix ("|<version>|g<burst>/<T>"), n, burst, T[, fallback T].
  -- A TAT stored without settings is taken to hold the fallback interval (the own one without a
  -- fallback). A stored version above the own one is adopted (decided with the stored burst and
  -- interval, which stay stored); otherwise outstanding debt stored under another interval is
  -- rescaled to the own one as by "m", and state stored under other settings (another burst or
  -- interval, or no settings) is stored converted with the decision even when rejected, so that
  -- a process deciding by older settings adopts the new ones from then on. Replies like "d" when
  -- decided with the own settings, plus the burst applied when adopted.
  local n, burst, T = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  local r
  if fast or not v then
    -- Stored by these settings and version (or absent): decided as they are.
    r = decide(n, burst, T, ARGV[1], false)
    r[7] = nil
    return r
  end
  local verText = string.match(ARGV[1], '^|(%d+)|')
  local ver, fbT = tonumber(verText), tonumber(ARGV[5] or '0')
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
  local suffix = ARGV[1]
  if wver > ver then
    suffix = '|' .. string.format('%d', wver) .. string.sub(ARGV[1], #verText + 2)
  end
  -- Same settings under another version (below the own one: the version moves up with the next
  -- admission) need no write on a rejection; any other settings do.
  local store = sburst ~= burst or sT ~= T
  if tat and tat > now and fromT ~= T then
    local scaled = rescale(tat - now, fromT, T)
    if not scaled then
      return redis.error_reply('RLDEBT ratelimit migrated GCRA debt out of range')
    end
    tat, store = now + scaled, true
  end
  r = decide(n, burst, T, suffix, store)
  r[7] = nil
  return r
end

-- Migration.
if not tat or tat <= now then
  return {-1, now}
end
local scaled = rescale(tat - now, tonumber(ARGV[2]), tonumber(ARGV[3]))
if not scaled then
  return redis.error_reply('RLDEBT ratelimit migrated GCRA debt out of range')
end
tat = now + scaled
if sver then
  put('|' .. string.format('%d', sver) .. '|g' .. string.format('%d', sburst) .. '/' .. string.format('%d', tonumber(ARGV[3])))
else
  put(nil)
end
return {1, now}
