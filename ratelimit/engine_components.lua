-- engine_components: decide or migrate a fixed window, sliding window, token bucket or composite
-- limit kept in one hash.
--
-- KEYS[1]  the limiter's hash. Fields (component index i from 0, times in server-time Unix µs):
--            L        layout tag: "fw", "sw", "tb" (standalone) or "cp" (composite)
--            U        "1", the storage format's marker (times in µs): a hash without it is foreign
--            S        configuration signature (composite, and any hash a keyed limiter wrote)
--            V        policy version (written by a keyed limiter)
--            <i>.n    fixed window: permits used in the current window
--            <i>.e    fixed window: end of the current window
--            <i>:<e>  sliding window: permits charged to the segment ending at e
--            <i>.t    token bucket: tokens available at <i>.r
--            <i>.r    token bucket: start of the current (partial) refill period
--
-- A settings block is: tag, signature ("" for standalone), k (component count), then k groups of
-- four: kind, limit, p1, p2 with
--   "f"  fixed window:   limit, window µs, 0
--   "s"  sliding window: limit, window µs, segment width µs
--   "t"  token bucket:   limit, tokens per period, period µs
-- Every time is a whole number of µs: the server time (about 1.8e15) plus twice any duration (Go
-- rejects durations above 2^51 µs) stays below 2^53, exact in Lua doubles.
--
-- Decide:  ARGV = "d", n (>= 0; 0 probes one permit and writes nothing), block
--   Returns a status row (luakit's reply convention) {status, remaining, retryAfter, reset, component,
--   now}: status 1 allowed, 0 rejected (busy), -1 (absent) for a probe (n = 0) of an absent key,
--   which is allowed; the controlling component's 0-based index (when allowed, the one with the
--   lowest remaining, first on ties; when rejected, the rejecting one with the longest wait, first on
--   ties: the one the request waits for),
--   its remaining permits after the decision (>= 0) and reset, µs until it is back at full capacity;
--   retryAfter µs until the whole batch could be admitted (0 when allowed); now the server time in µs.
--   Only an allowed decision with n > 0 writes: every component consumes n, expired sliding segments
--   are deleted and the key expires (PEXPIREAT, whole ms rounded up) when every component is back at
--   full capacity.
--
-- Migrate: ARGV = "m", old block, new block (same component count and kinds)
--   Converts the stored usage by the rules of each kind (see policy.go) and stores the new signature.
--   Returns a status row (luakit's reply convention): {1, now} when state was converted, {-1, now}
--   (absent) when the key is absent (it stays absent).
--
-- Errors (nothing written), the script's own codes (never a server code such as WRONGTYPE):
-- "RLFOREIGN ..." when the key is not a hash of this layout (another type, another limiter's
-- layout tag, or no U field); "RLMISMATCH ..." when a composite's stored signature differs from the
-- expected one.
-- Complexity: O(F + S log S) for F hash fields and S active segments.
-- ACL: HGETALL, TIME, HDEL, HSET, PEXPIREAT and DEL. luakit_acl (below) checks, before anything else,
-- the writes (HDEL in chunks, HSET, PEXPIREAT, DEL: each may run after another write) unless the call
-- is a probe, which writes nothing: a user the ACL refuses one of them gets NOPERM and nothing is
-- written. A refused HGETALL or TIME fails before any write (the server's NOPERM error), so they are
-- not checked: each check costs server time on every call.
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

-- loadRaw reads the hash: its layout tag, signature, version and one state table per stored
-- component index (0-based); or an error reply when the key holds another type or a hash without
-- the U field.
local function loadRaw()
  local raw = redis.pcall('HGETALL', key)
  if raw.err then
    if string.sub(raw.err, 1, 9) ~= 'WRONGTYPE' then
      return nil, raw -- not a type clash (NOPERM...): the server's own error
    end
    return nil, redis.error_reply('RLFOREIGN ratelimit key holds another type')
  end
  local h = {byIdx = {}, exists = #raw > 0}
  for i = 1, #raw, 2 do
    local f, v = raw[i], raw[i + 1]
    if f == 'L' then
      h.tag = v
    elseif f == 'S' then
      h.sig = v
    elseif f == 'V' then
      h.ver = tonumber(v)
    elseif f == 'U' then
      h.us = true
    else
      local idx, sep, rest = string.match(f, '^(%d+)([.:])(%d*%a*)$')
      local x = tonumber(v)
      if idx and x then
        local n = tonumber(idx)
        local s = h.byIdx[n]
        if not s then
          s = {segs = {}}
          h.byIdx[n] = s
        end
        if sep == ':' then
          s.segs[tonumber(rest)] = x
        else
          s[rest] = x
        end
      end
    end
  end
  if h.exists and not h.us then
    return nil, redis.error_reply('RLFOREIGN ratelimit key holds another storage format')
  end
  return h, nil
end

-- load reads the hash into one state table per component of b; returns states, exists, or an error
-- reply, and the raw hash.
local function load(b)
  local h, err = loadRaw()
  if err then
    return nil, false, err, nil
  end
  local st = {}
  for i = 1, b.k do
    st[i] = h.byIdx[i - 1] or {segs = {}}
  end
  if not h.exists then
    return st, false, nil, h
  end
  if h.tag ~= b.tag then
    return nil, true, redis.error_reply('RLFOREIGN ratelimit key holds another limiter layout'), h
  end
  if b.sig ~= '' and h.sig ~= b.sig then
    return nil, true, redis.error_reply('RLMISMATCH ratelimit stored composite configuration differs'), h
  end
  return st, true, nil, h
end

local now = luakit_now_us()

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

-- retry returns µs until the component can admit n permits (0 when it can now).
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
    local ms = (expireAt - expireAt % 1000) / 1000
    if expireAt % 1000 > 0 then
      ms = ms + 1
    end
    redis.call('PEXPIREAT', key, int(ms))
  else
    redis.call('DEL', key)
  end
end

-- convert migrates one component's state s from settings oc to nc (same kind) by the rules of the
-- kind (see policy.go); it records what the stored hash must change in s.gone (sliding segments to
-- delete) and s.dirty (token bucket fields to rewrite).
local function convert(oc, nc, s)
  if nc.kind == 'f' then
    -- Keep the count and the deadline; the new width applies from the next window.
    prepare(oc, s)
  elseif nc.kind == 's' then
    -- Keep segments active under both windows; the new window sets their lifetime.
    local keep = oc.p1
    if nc.p1 < keep then
      keep = nc.p1
    end
    s.ends, s.gone = {}, {}
    for e, _ in pairs(s.segs) do
      if e + keep > now then
        s.ends[#s.ends + 1] = e
      else
        s.gone[#s.gone + 1] = e
      end
    end
    for _, e in ipairs(s.gone) do
      s.segs[e] = nil
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
      s.dirty = true
    else
      s.t, s.r = nc.limit, now
    end
  end
end

-- dump appends every field of component i's settled state s (settings c) to set.
local function dump(i, c, s, set)
  local p = tostring(i - 1)
  if c.kind == 'f' then
    if s.e and s.n and s.n > 0 then
      set[#set + 1] = p .. '.e'
      set[#set + 1] = int(s.e)
      set[#set + 1] = p .. '.n'
      set[#set + 1] = int(s.n)
    end
  elseif c.kind == 's' then
    for _, e in ipairs(s.ends) do
      set[#set + 1] = p .. ':' .. int(e)
      set[#set + 1] = int(s.segs[e])
    end
  else
    set[#set + 1] = p .. '.t'
    set[#set + 1] = int(s.t)
    set[#set + 1] = p .. '.r'
    set[#set + 1] = int(s.r)
  end
end

-- parseSig rebuilds the settings block of a stored signature (see signature in engine_compile.go);
-- nil when it is not one.
local function parseSig(sig, tag)
  if string.sub(sig, 1, 3) ~= 'v2|' then
    return nil
  end
  local b = {tag = tag, sig = '', k = 0, c = {}}
  if tag == 'cp' then
    b.sig = sig
  end
  for part in string.gmatch(string.sub(sig, 3), '|([^|]+)') do
    local kind = string.sub(part, 1, 1)
    local v = {}
    for d in string.gmatch(string.sub(part, 2), '%d+') do
      v[#v + 1] = tonumber(d)
    end
    local c
    if kind == 'f' and #v == 2 then
      c = {kind = 'f', limit = v[1], p1 = v[2], p2 = 0}
    elseif kind == 's' and #v == 3 and v[3] > 0 then
      c = {kind = 's', limit = v[1], p1 = v[2], p2 = math.ceil(v[2] / v[3])}
    elseif kind == 't' and #v == 3 and v[3] > 0 then
      c = {kind = 't', limit = v[1], p1 = v[2], p2 = v[3]}
    else
      return nil
    end
    b.k = b.k + 1
    b.c[b.k] = c
  end
  if b.k == 0 then
    return nil
  end
  return b
end

-- decide decides n permits on the prepared states st of block b. hdr (or nil) holds the L, U, S and
-- V fields to store with an admission; rewrite replaces the whole hash (after a migration) and is
-- written even by a rejection (never by a probe). Returns the reply.
local function decide(b, st, n, hdr, rewrite)
  local want = n
  if want == 0 then
    want = 1
  end
  -- bind is the rejecting component with the longest wait (the first on ties): the one a rejection
  -- reports, since the request is admissible only once it is.
  local avail, allowed, wait, bind = {}, 1, 0, nil
  for i = 1, b.k do
    local a = prepare(b.c[i], st[i])
    avail[i] = a
    local r = retry(b.c[i], st[i], a, want)
    if a < want then
      allowed = 0
      if not bind or r > wait then
        wait, bind = r, i
      end
    end
  end
  local used = 0
  if n > 0 and (allowed == 1 or rewrite) then
    local set, del = {}, {}
    if hdr then
      for _, x in ipairs(hdr) do
        set[#set + 1] = x
      end
    end
    if allowed == 1 then
      used = n
      for i = 1, b.k do
        consume(b.c[i], st[i], i, n, set, del)
      end
    end
    if rewrite then
      set, del = {}, {}
      for _, x in ipairs(hdr) do
        set[#set + 1] = x
      end
      for i = 1, b.k do
        dump(i, b.c[i], st[i], set)
      end
      redis.call('DEL', key)
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
  if bind then
    low, comp = avail[bind], bind
    if low < 0 then
      low = 0
    end
  else
    for i = 1, b.k do
      local rem = avail[i] - used
      if rem < 0 then
        rem = 0
      end
      if not low or rem < low then
        low, comp = rem, i
      end
    end
  end
  return {allowed, low, wait, full(b.c[comp], st[comp]) - now, comp - 1, now, b.c[comp].limit}
end

if ARGV[1] == 'd' then
  local n = tonumber(ARGV[2])
  local b = block(3)
  local st, exists, err, h = load(b)
  if err then
    return err
  end
  local hdr = nil
  if not exists then
    hdr = {'L', b.tag, 'U', '1'}
    if b.sig ~= '' then
      hdr[5], hdr[6] = 'S', b.sig
    end
  end
  local r = decide(b, st, n, hdr, false)
  r[7] = nil
  if n == 0 and not exists then
    r[1] = -1
  end
  return r
end

if ARGV[1] == 'k' then
  -- Keyed decide: ARGV = "k", n, version, own signature, "1" when a fallback block follows the
  -- own block ("0" otherwise), own block[, fallback block]. The stored hash carries its settings'
  -- signature (S) and version (V, absent = 0); unsigned state is taken to hold the fallback settings
  -- (the own ones without a fallback). A stored version above the own one is adopted (decided by the
  -- stored settings, which stay stored); otherwise state stored under other settings is migrated to
  -- the own ones by the rules of each kind, matching the j-th component of a kind to the j-th stored
  -- one of that kind (a component without a match starts at full capacity). Replies like "d", plus
  -- the controlling component's limit.
  local n = tonumber(ARGV[2])
  local ver = tonumber(ARGV[3])
  local ownSig = ARGV[4]
  local own, j = block(6)
  local fallback = nil
  if ARGV[5] == '1' then
    fallback = block(j)
  end
  local h, err = loadRaw()
  if err then
    return err
  end
  if h.exists and h.tag ~= own.tag then
    return redis.error_reply('RLFOREIGN ratelimit key holds another limiter layout')
  end
  local sver = h.ver or 0
  local from, fromSig = own, ownSig
  if h.exists then
    if h.sig == nil then
      if fallback then
        from, fromSig = fallback, ''
      end
    elseif h.sig ~= ownSig then
      from, fromSig = parseSig(h.sig, h.tag), h.sig
      if not from then
        return redis.error_reply('RLFOREIGN ratelimit key holds an unknown configuration')
      end
    end
  end
  local use, useSig = own, ownSig
  if from ~= own and h.sig ~= nil and sver > ver then
    use, useSig = from, h.sig
  end
  local wver = sver
  if ver > wver then
    wver = ver
  end
  local hdr = {'L', own.tag, 'S', useSig, 'V', int(wver), 'U', '1'}
  local st = {}
  local rewrite = false
  if use == from then
    for i = 1, use.k do
      st[i] = h.byIdx[i - 1] or {segs = {}}
    end
  else -- state from other settings: converted component by component
    rewrite = true
    local seen, kinds = {}, {}
    for i = 1, from.k do
      local kind = from.c[i].kind
      kinds[kind] = kinds[kind] or {}
      kinds[kind][#kinds[kind] + 1] = i
    end
    for i = 1, use.k do
      local kind = use.c[i].kind
      seen[kind] = (seen[kind] or 0) + 1
      local oi = kinds[kind] and kinds[kind][seen[kind]]
      local s = {segs = {}}
      if oi then
        s = h.byIdx[oi - 1] or s
        convert(from.c[oi], use.c[i], s)
      end
      st[i] = s
    end
  end
  if not rewrite and (not h.exists or h.sig ~= useSig or sver ~= wver) then
    -- Signing (or re-versioning) stored state changes no usage: an admission stores the header.
  elseif not rewrite then
    hdr = nil
  end
  local r = decide(use, st, n, hdr, rewrite)
  if n == 0 and not h.exists then
    r[1] = -1
  end
  return r
end

-- Migration: ARGV = "m", old block, new block.
local old, j = block(2)
local new = block(j)
local st, exists, err, h = load(old)
if err then
  return err
end
if not exists then
  return {-1, now}
end
local set, del = {}, {}
if new.sig ~= '' then
  set[1], set[2] = 'S', new.sig
end
local last = now
for i = 1, new.k do
  local s = st[i]
  local p = tostring(i - 1)
  convert(old.c[i], new.c[i], s)
  for _, e in ipairs(s.gone or {}) do
    del[#del + 1] = p .. ':' .. int(e)
  end
  if s.dirty then
    set[#set + 1] = p .. '.t'
    set[#set + 1] = int(s.t)
    set[#set + 1] = p .. '.r'
    set[#set + 1] = int(s.r)
  end
  local f = full(new.c[i], s)
  if f > last then
    last = f
  end
end
write(set, del, last)
return {1, now}
