-- delete: remove the latch when it still holds the caller's generation, waking its waiters.
--
-- KEYS[1]  latch key: a hash {gen, count, initial, expires[, aborted][, prevdone]}
-- ARGV[1]  the caller's generation id
--
-- Returns 1 when the key was deleted, 0 when it holds another generation, something else, or nothing
-- (then nothing was written). Publishes 'delete' on the sharded channel named like the key. O(1).
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then
  return 0
end
if redis.call('HGET', KEYS[1], 'gen') ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('SPUBLISH', KEYS[1], 'delete')
return 1
