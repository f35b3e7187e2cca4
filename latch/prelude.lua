-- The latch's prelude: functions its scripts share. luakit.MustLoad puts in front of each script the
-- ones it calls (see luakit.Prelude); no script runs this file on its own. The latch key is a hash
-- {gen, count, initial, expires[, aborted][, prevdone]}.

-- latch_count reports whether c is a count the scripts write: a canonical decimal int64 >= 0. Anything
-- else, a missing field (false) included, is foreign data.
local function latch_count(c)
  return luakit_int64(c) and string.sub(c, 1, 1) ~= '-'
end

-- latch_live checks that the latch at key holds generation gen, neither aborted nor complete, for a
-- script about to change it (abort, countdown). It returns nil then, else the status row the script
-- answers, nothing written: {-1, now} absent (no latch at the key: deleted or expired; now is the
-- server time in Unix ms, a string), {-3, reason} foreign ('wrongtype': another type; 'foreign': a hash
-- without gen, or a count that latch_count refuses), {-2} not owner (the key holds another generation:
-- replaced), {-6, reason} aborted (with its reason), {-7} completed (the count is already zero).
local function latch_live(key, gen)
  local s = luakit_type(key, 'hash')
  if s == -1 then
    return {-1, string.format('%d', luakit_now_ms())}
  end
  if s == -3 then
    return {-3, 'wrongtype'}
  end
  local v = redis.call('HMGET', key, 'gen', 'count', 'aborted')
  if not v[1] or not latch_count(v[2]) then
    return {-3, 'foreign'}
  end
  if v[1] ~= gen then
    return {-2}
  end
  if v[3] then
    return {-6, v[3]}
  end
  if v[2] == '0' then
    return {-7}
  end
  return nil
end
