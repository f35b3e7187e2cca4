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
  luakit_acl({'set', KEYS[1]})
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
local tat = nil
if v then
  tat = tonumber(v)
  if not tat or not string.match(v, '^%d+$') then
    return redis.error_reply('RLFOREIGN ratelimit key holds another limiter layout')
  end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

if ARGV[1] == 'd' then
  local n = tonumber(ARGV[2])
  local burst = tonumber(ARGV[3])
  local T = tonumber(ARGV[4])
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
    redis.call('SET', key, string.format('%d', tat), 'PXAT', string.format('%d', tat))
  end
  local rem = math.floor((cap - (tat - now)) / T)
  if rem < 0 then
    rem = 0
  end
  return {allowed, rem, wait, tat - now, 0, now}
end

-- Migration.
if not tat or tat <= now then
  return {0, now}
end
local oldT, newT = tonumber(ARGV[2]), tonumber(ARGV[3])
local debt = tat - now
local q = math.floor(debt / oldT)
local r = debt - q * oldT
local scaled = q * newT
if scaled > maxDebt then
  return redis.error_reply('RLDEBT ratelimit migrated GCRA debt out of range')
end
-- ceil(r*newT/oldT) by binary long multiplication: every intermediate stays below 3*oldT, exact in
-- doubles, where r*newT itself could exceed 2^53.
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
  return redis.error_reply('RLDEBT ratelimit migrated GCRA debt out of range')
end
local at = string.format('%d', now + scaled)
redis.call('SET', key, at, 'PXAT', at)
return {1, now}
