-- The prelude: the Lua functions Coordkit's scripts share. MustLoad puts in front of each script (after
-- its header comment) the functions of this file that the script calls, and those they call, so a
-- script defines only what it uses and no expression is copied from script to script. Each function
-- is a local, defined by one line "local function luakit_<name>(" and ended by a line "end".
--
-- Statuses are those of luakit's reply convention (see luakit's package documentation, # Replies):
-- 1 ok, 0 busy, -1 absent, -2 not owner, -3 foreign, -4 counter, -5 mismatch, -6 aborted,
-- -7 completed.

-- luakit_now_ms returns the server time (TIME) in whole milliseconds since the Unix epoch, as a Lua
-- number (exact: it is below 2^53).
local function luakit_now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- luakit_now_us returns the server time (TIME) in whole microseconds since the Unix epoch, as a Lua
-- number (exact: it is below 2^53).
local function luakit_now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- luakit_int64 reports whether s is a string holding the canonical decimal form of an int64 (the form
-- INCRBY accepts and Go's strconv.FormatInt writes): '0', or an optional '-', a digit 1-9 and more
-- digits, within [-2^63, 2^63-1]. Equal-length digit strings compare like the numbers they write.
local function luakit_int64(s)
  if type(s) ~= 'string' then return false end
  if s == '0' then return true end
  local digits = string.match(s, '^%-?([1-9]%d*)$')
  if not digits then return false end
  if #digits ~= 19 then return #digits < 19 end
  if string.sub(s, 1, 1) == '-' then return digits <= '9223372036854775808' end
  return digits <= '9223372036854775807'
end

-- luakit_int64_split returns a canonical decimal int64 s as (hi, lo) with s = hi * 1e9 + lo and
-- 0 <= lo < 1e9: two parts a Lua double holds exactly, so sums and comparisons of int64s are exact
-- over the whole range (compare hi, then lo; carry 1e9 from lo into hi).
local function luakit_int64_split(s)
  local neg = string.sub(s, 1, 1) == '-'
  if neg then s = string.sub(s, 2) end
  local n = #s
  local hi, lo = 0, tonumber(s)
  if n > 9 then
    hi = tonumber(string.sub(s, 1, n - 9))
    lo = tonumber(string.sub(s, n - 8))
  end
  if neg then
    hi, lo = -hi, -lo
    if lo < 0 then lo = lo + 1e9; hi = hi - 1 end
  end
  return hi, lo
end

-- luakit_type returns the status of key's Redis type (TYPE) against want ('string', 'hash', 'zset',
-- ...): 1 (ok) when key holds a want, -1 (absent) when it does not exist, -3 (foreign) when it holds
-- another type. TYPE's status reply reaches Lua as a table {ok = type} under RESP2 and RESP3; a plain
-- string is accepted too. Reads TYPE only. O(1).
local function luakit_type(key, want)
  local t = redis.call('TYPE', key)
  if type(t) == 'table' then
    t = t['ok']
  end
  if t == 'none' then
    return -1
  end
  if t ~= want then
    return -3
  end
  return 1
end

-- luakit_owner returns the status of token's hold on key (a string holding the owner token) or, with
-- field, on that field of the hash key: 1 (ok) when it holds token, -1 (absent) when it does not
-- exist, -2 (not owner) when it holds another token. Reads only (GET, or HGET with field).
local function luakit_owner(key, token, field)
  local v
  if field then
    v = redis.call('HGET', key, field)
  else
    v = redis.call('GET', key)
  end
  if not v then
    return -1
  end
  if v == token then
    return 1
  end
  return -2
end

-- luakit_del_owned is the owner-checked delete: it deletes key (DEL) or, with field, the hash field
-- (HDEL) only when it holds token, and returns luakit_owner's status: 1 deleted, -1 absent, -2 held by
-- another owner (nothing written).
local function luakit_del_owned(key, token, field)
  local s = luakit_owner(key, token, field)
  if s == 1 then
    if field then
      redis.call('HDEL', key, field)
    else
      redis.call('DEL', key)
    end
  end
  return s
end

-- luakit_fence_read checks the fence counter at key without writing, and returns its value as a
-- canonical decimal string ('0' when the key is absent) or nil and the reason it cannot issue tokens,
-- first match: 'wrongtype' (another Redis type), 'expiring' (the key has a TTL), 'negative' (a
-- canonical int64 below 0), 'malformed' (anything but a canonical decimal int64). A caller that issues
-- value + 1 refuses 9223372036854775807 itself ('overflow'). Reads TYPE, PTTL and GET. O(1).
local function luakit_fence_read(key)
  local s = luakit_type(key, 'string')
  if s == -1 then
    return '0'
  end
  if s == -3 then
    return nil, 'wrongtype'
  end
  if redis.call('PTTL', key) ~= -1 then
    return nil, 'expiring'
  end
  local v = redis.call('GET', key)
  if not luakit_int64(v) then
    return nil, 'malformed'
  end
  if string.sub(v, 1, 1) == '-' then
    return nil, 'negative'
  end
  return v
end

-- luakit_minus_one returns the canonical decimal string one below s, a canonical decimal integer
-- string above the minimum int64: string arithmetic, exact where a double is not.
local function luakit_minus_one(s)
  if s == '0' then
    return '-1'
  end
  if string.sub(s, 1, 1) == '-' then
    -- -(|s| + 1): the last digit that is not a 9 goes up one, the 9s after it become 0s.
    local head, nines = string.match(string.sub(s, 2), '^(.-)(9*)$')
    local up = head == '' and '1' or string.sub(head, 1, -2) .. (string.byte(head, -1) - 47)
    return '-' .. up .. string.rep('0', #nines)
  end
  -- s >= 1: the last digit that is not a 0 goes down one, the 0s after it become 9s.
  local head, zeros = string.match(s, '^(.-)(0*)$')
  local r = string.sub(head, 1, -2) .. (string.byte(head, -1) - 49) .. string.rep('9', #zeros)
  if #r > 1 and string.sub(r, 1, 1) == '0' then
    r = string.sub(r, 2)
  end
  return r
end

-- luakit_fence_next issues the next fencing token from the counter at key: it returns the token (a
-- Lua number below 2^53, else the counter read back as a decimal string, since a double cannot hold
-- every int64 above 2^53), or nil and the reason the counter cannot issue one, first match:
-- 'wrongtype', 'expiring', then 'negative', 'malformed' or 'overflow' (the reasons of
-- luakit_fence_read, and the int64 maximum), with the counter as it was; or nil and the server's
-- error reply (a table) for another INCR failure. INCR checks the counter as it increments it (it
-- refuses another type, a non-canonical value and the maximum, writing nothing); a negative or
-- expiring counter is incremented, then its exact previous value is put back with SET KEEPTTL. The
-- common path is INCR and PTTL; GET only above 2^53. O(1).
local function luakit_fence_next(key)
  local token = redis.pcall('INCR', key)
  if type(token) == 'table' then
    local err = token.err or ''
    if string.sub(err, 1, 9) == 'WRONGTYPE' then
      return nil, 'wrongtype'
    end
    local reason
    if string.find(err, 'would overflow', 1, true) then
      reason = 'overflow'
    elseif string.find(err, 'not an integer', 1, true) then
      reason = 'malformed'
    else
      return nil, token
    end
    if redis.call('PTTL', key) >= 0 then
      reason = 'expiring'
    end
    return nil, reason
  end
  local reason
  if redis.call('PTTL', key) ~= -1 then
    reason = 'expiring'
  elseif token <= 0 then
    reason = 'negative'
  end
  if reason then
    redis.call('SET', key, luakit_minus_one(redis.call('GET', key)), 'KEEPTTL')
    return nil, reason
  end
  if token >= 9007199254740992 then
    -- Above 2^53 the double may be rounded: read the exact value back.
    token = redis.call('GET', key)
  end
  return token
end
