-- state: read a latch and the server time in one atomic step.
--
-- KEYS[1]  latch key: a hash {gen, count, initial, expires[, aborted][, prevdone]}
--
-- Returns the status row {status, gen, count, initial, expires, aborted, reason, prevdone, now}
-- (luakit's reply convention), every value a string:
--   status    1 (ok: a latch), -1 (absent: no key) or -3 (foreign: the key holds something that is not
--             a latch)
--   gen       the current generation id ('' unless kind is 'latch'); count / initial: decimal int64s
--   expires   the generation's server-time deadline in Unix ms, '0' for none
--   aborted   '1' when the generation was aborted, else '0'; reason: the abort reason
--   prevdone  the previous generation when it had completed before a reset replaced it, else ''
--   now       the server time in Unix ms
-- Read-only. O(1).
local now = string.format('%d', luakit_now_ms())
local s = luakit_type(KEYS[1], 'hash')
if s ~= 1 then
  return {s, '', '', '', '0', '0', '', '', now}
end
local v = redis.call('HMGET', KEYS[1], 'gen', 'count', 'initial', 'expires', 'aborted', 'prevdone')
if not v[1] or not v[2] then
  return {-3, '', '', '', '0', '0', '', '', now}
end
local aborted = '0'
if v[5] then
  aborted = '1'
end
return {1, v[1], v[2], v[3] or v[2], v[4] or '0', aborted, v[5] or '', v[6] or '', now}
