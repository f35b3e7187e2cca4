-- fair_inspect: read a fair lock's state for an operator, writing nothing.
--
-- KEYS as in prelude.lua: lease, fence, queue, waiter key prefix.
-- ARGV[1]  the most queue entries to list (>= 0)
--
-- Returns {status, pttl, fence, queued, entries}: the first three as inspect.lua's (status -3 also when
-- the queue key holds another Redis type); queued the queue's length; entries a flat list of
-- {ttl ms, slice ms, key pttl} per listed entry, oldest first (key pttl -2 when the waiter's key is
-- gone: a waiter the next release skips). Never returns owner tokens. O(listed entries).
local held = luakit_type(KEYS[1], 'string')
local fs = luakit_type(KEYS[2], 'string')
local qs = luakit_type(KEYS[3], 'list')
if held == -3 or fs == -3 or qs == -3 then
  return {-3, -2, '', 0, {}}
end
local pttl, fence, queued, entries = -2, '', 0, {}
if held == 1 then
  pttl = redis.call('PTTL', KEYS[1])
end
if fs == 1 then
  fence = redis.call('GET', KEYS[2])
end
if qs == 1 then
  queued = redis.call('LLEN', KEYS[3])
  local n = tonumber(ARGV[1])
  if n > 0 then
    for _, e in ipairs(redis.call('LRANGE', KEYS[3], 0, n - 1)) do
      local a = string.find(e, ':', 1, true)
      local b = a and string.find(e, ':', a + 1, true)
      if b then
        table.insert(entries, tonumber(string.sub(e, a + 1, b - 1)))
        table.insert(entries, tonumber(string.sub(e, b + 1)))
        table.insert(entries, redis.call('PTTL', KEYS[4] .. string.sub(e, 1, a - 1)))
      end
    end
  end
end
return {held, pttl, fence, queued, entries}
