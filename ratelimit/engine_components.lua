-- engine_components: decide or migrate a fixed window, sliding window, token bucket or composite
-- limit kept in one hash.
--
-- KEYS[1]  the limiter's hash. Fields (component index i from 0, times in server-time Unix ms):
--            L        layout tag: "fw", "sw", "tb" (standalone) or "cp" (composite)
--            S        configuration signature (composite only)
--            <i>.n    fixed window: permits used in the current window
--            <i>.e    fixed window: end of the current window
--            <i>:<e>  sliding window: permits charged to the segment ending at e
--            <i>.t    token bucket: tokens available at <i>.r
--            <i>.r    token bucket: start of the current (partial) refill period
--
-- A settings block is: tag, signature ("" for standalone), k (component count), then k groups of
-- four: kind, limit, p1, p2 with
--   "f"  fixed window:   limit, window ms, 0
--   "s"  sliding window: limit, window ms, segment width ms
--   "t"  token bucket:   limit, tokens per period, period ms
--
-- Decide:  ARGV = "d", n (>= 0; 0 probes one permit and writes nothing), block
--   Returns {allowed, remaining, retryAfter, reset, component, now}: allowed 1/0; remaining permits
--   after the decision (minimum over components, >= 0); retryAfter ms until the whole batch could be
--   admitted (0 when allowed); reset ms until the controlling component (lowest remaining, first on
--   ties) is back at full capacity; component its 0-based index; now the server time in ms.
--   Only an allowed decision with n > 0 writes: every component consumes n, expired sliding segments
--   are deleted and the key expires (PEXPIREAT) when every component is back at full capacity.
--
-- Migrate: ARGV = "m", old block, new block (same component count and kinds)
--   Converts the stored usage by the rules of each kind (see policy.go) and stores the new signature.
--   Returns {1, now} when state was converted, {0, now} when the key is absent (it stays absent).
--
-- Errors (nothing written), the script's own codes (never a server code such as WRONGTYPE):
-- "RLFOREIGN ..." when the key is not a hash of this layout (another type, or another limiter's
-- layout tag); "RLMISMATCH ..." when a composite's stored signature differs from the expected one.
-- Complexity: O(F + S log S) for F hash fields and S active segments.
-- ACL: luakit_acl (below) checks every command this script may run before anything else, so a
-- user the ACL refuses one of them gets NOPERM and nothing is written.
luakit_acl({'hgetall', KEYS[1]}, {'time'})
if not (ARGV[1] == 'd' and ARGV[2] == '0') then -- a probe (n = 0, also run read-only) writes nothing
  luakit_acl({'hdel', KEYS[1]}, {'hset', KEYS[1]}, {'pexpireat', KEYS[1]}, {'del', KEYS[1]})
end
local key = KEYS[1]

local function int(x)
  return string.format('%d', x)
end

local function block(at)
  local b = {tag = ARGV[at], sig = ARGV[at + 1], k = tonumber(ARGV[at + 2]), c = {}}
  local j = at + 3
  for i = 1, b.k do
    b.c[i] = {kind = ARGV[j], limit = tonumber(ARGV[j + 1]),
              p1 = tonumber(ARGV[j + 2]), p2 = tonumber(ARGV[j + 3])}
    j = j + 4
  end
  return b, j
end

-- load reads the hash into one state table per component of b; returns states, exists, or an error
-- reply.
local function load(b)
  local raw = redis.pcall('HGETALL', key)
  if raw.err then
    if string.sub(raw.err, 1, 9) ~= 'WRONGTYPE' then
      return nil, false, raw -- not a type clash (NOPERM...): the server's own error
    end
    return nil, false, redis.error_reply('RLFOREIGN ratelimit key holds another type')
  end
  local st = {}
  for i = 1, b.k do
    st[i] = {segs = {}}
  end
  if #raw == 0 then
    return st, false, nil
  end
  local tag, sig = nil, nil
  for i = 1, #raw, 2 do
    local f, v = raw[i], raw[i + 1]
    if f == 'L' then
      tag = v
    elseif f == 'S' then
      sig = v
    else
      local idx, sep, rest = string.match(f, '^(%d+)([.:])(%d*%a*)$')
      local s = idx and st[tonumber(idx) + 1]
      local x = tonumber(v)
      if s and x then
        if sep == ':' then
          s.segs[tonumber(rest)] = x
        else
          s[rest] = x
        end
      end
    end
  end
  if tag ~= b.tag then
    return nil, true, redis.error_reply('RLFOREIGN ratelimit key holds another limiter layout')
  end
  if b.sig ~= '' and sig ~= b.sig then
    return nil, true, redis.error_reply('RLMISMATCH ratelimit stored composite configuration differs')
  end
  return st, true, nil
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- prepare settles component state at now and returns permits available now.
local function prepare(c, s)
  if c.kind == 'f' then
    if not (s.e and s.e > now and s.n) then
      s.e, s.n = nil, 0
    end
    return c.limit - s.n
  elseif c.kind == 's' then
    local used, ends, dead = 0, {}, {}
    for e, cnt in pairs(s.segs) do
      if e + c.p1 > now then
        used = used + cnt
        ends[#ends + 1] = e
      else
        dead[#dead + 1] = e
      end
    end
    table.sort(ends)
    s.used, s.ends, s.dead = used, ends, dead
    return c.limit - used
  else
    local tk, r = s.t, s.r
    if not (tk and r) then
      tk, r = c.limit, now
    end
    if tk < c.limit then
      local k = math.floor((now - r) / c.p2)
      if k > 0 then
        if k >= math.ceil((c.limit - tk) / c.p1) then
          tk = c.limit
        else
          tk, r = tk + k * c.p1, r + k * c.p2
        end
      end
    end
    if tk >= c.limit then
      tk, r = c.limit, now
    end
    s.t, s.r = tk, r
    return tk
  end
end

-- retry returns ms until the component can admit n permits (0 when it can now).
local function retry(c, s, avail, n)
  if avail >= n then
    return 0
  end
  if c.kind == 'f' then
    return s.e - now
  elseif c.kind == 's' then
    local need, freed = n - avail, 0
    for _, e in ipairs(s.ends) do
      freed = freed + s.segs[e]
      if freed >= need then
        return e + c.p1 - now
      end
    end
    return 0
  else
    return s.r + math.ceil((n - s.t) / c.p1) * c.p2 - now
  end
end

-- full returns the server time at which the component is back at full capacity.
local function full(c, s)
  if c.kind == 'f' then
    if s.n > 0 then
      return s.e
    end
    return now
  elseif c.kind == 's' then
    local last = s.ends[#s.ends]
    if last then
      return last + c.p1
    end
    return now
  else
    if s.t >= c.limit then
      return now
    end
    return s.r + math.ceil((c.limit - s.t) / c.p1) * c.p2
  end
end

-- consume takes n permits from a prepared component and appends its writes.
local function consume(c, s, i, n, set, del)
  local p = tostring(i - 1)
  if c.kind == 'f' then
    if s.n == 0 then
      s.e = now + c.p1
      set[#set + 1] = p .. '.e'
      set[#set + 1] = int(s.e)
    end
    s.n = s.n + n
    set[#set + 1] = p .. '.n'
    set[#set + 1] = int(s.n)
  elseif c.kind == 's' then
    local w = c.p2
    local seg = now
    local m = now % w
    if m ~= 0 then
      seg = now - m + w
    end
    local old = s.segs[seg]
    s.segs[seg] = (old or 0) + n
    if not old then
      s.ends[#s.ends + 1] = seg
      table.sort(s.ends)
    end
    set[#set + 1] = p .. ':' .. int(seg)
    set[#set + 1] = int(s.segs[seg])
    for _, e in ipairs(s.dead) do
      del[#del + 1] = p .. ':' .. int(e)
    end
  else
    s.t = s.t - n
    set[#set + 1] = p .. '.t'
    set[#set + 1] = int(s.t)
    set[#set + 1] = p .. '.r'
    set[#set + 1] = int(s.r)
  end
end

local function write(set, del, expireAt)
  -- HDEL in chunks: unpack is limited by the Lua stack (32 sliding windows of 1024 segments can
  -- leave tens of thousands of expired fields).
  for i = 1, #del, 1000 do
    redis.call('HDEL', key, unpack(del, i, math.min(i + 999, #del)))
  end
  if #set > 0 then
    redis.call('HSET', key, unpack(set))
  end
  if expireAt > now then
    redis.call('PEXPIREAT', key, int(expireAt))
  else
    redis.call('DEL', key)
  end
end

if ARGV[1] == 'd' then
  local n = tonumber(ARGV[2])
  local b = block(3)
  local st, exists, err = load(b)
  if err then
    return err
  end
  local want = n
  if want == 0 then
    want = 1
  end
  local avail, allowed, wait = {}, 1, 0
  for i = 1, b.k do
    local a = prepare(b.c[i], st[i])
    avail[i] = a
    local r = retry(b.c[i], st[i], a, want)
    if a < want then
      allowed = 0
      if r > wait then
        wait = r
      end
    end
  end
  local used = 0
  if allowed == 1 and n > 0 then
    used = n
    local set, del = {}, {}
    if not exists then
      set[1], set[2] = 'L', b.tag
      if b.sig ~= '' then
        set[3], set[4] = 'S', b.sig
      end
    end
    for i = 1, b.k do
      consume(b.c[i], st[i], i, n, set, del)
    end
    local last = now
    for i = 1, b.k do
      local f = full(b.c[i], st[i])
      if f > last then
        last = f
      end
    end
    write(set, del, last)
  end
  local low, comp = nil, 1
  for i = 1, b.k do
    local rem = avail[i] - used
    if rem < 0 then
      rem = 0
    end
    if not low or rem < low then
      low, comp = rem, i
    end
  end
  return {allowed, low, wait, full(b.c[comp], st[comp]) - now, comp - 1, now}
end

-- Migration.
local old, j = block(2)
local new = block(j)
local st, exists, err = load(old)
if err then
  return err
end
if not exists then
  return {0, now}
end
local set, del = {}, {}
if new.sig ~= '' then
  set[1], set[2] = 'S', new.sig
end
local last = now
for i = 1, new.k do
  local oc, nc, s = old.c[i], new.c[i], st[i]
  local p = tostring(i - 1)
  if nc.kind == 'f' then
    -- Keep the count and the deadline; the new width applies from the next window.
    prepare(oc, s)
  elseif nc.kind == 's' then
    -- Keep segments active under both windows; the new window sets their lifetime.
    local keep = oc.p1
    if nc.p1 < keep then
      keep = nc.p1
    end
    s.ends = {}
    for e, _ in pairs(s.segs) do
      if e + keep > now then
        s.ends[#s.ends + 1] = e
      else
        del[#del + 1] = p .. ':' .. int(e)
      end
    end
    table.sort(s.ends)
  else
    -- Settle complete periods at the old rate, clamp, restart the period now.
    if s.t and s.r then
      prepare(oc, s)
      if s.t > nc.limit then
        s.t = nc.limit
      end
      s.r = now
      set[#set + 1] = p .. '.t'
      set[#set + 1] = int(s.t)
      set[#set + 1] = p .. '.r'
      set[#set + 1] = int(s.r)
    else
      s.t, s.r = nc.limit, now
    end
  end
  local f = full(nc, s)
  if f > last then
    last = f
  end
end
write(set, del, last)
return {1, now}
