-- acquire: take the lock on this node when it is free (SET NX PX) and, in fenced mode, read the node's
-- fence counter in the same atomic step; with the restart quarantine on, also report which server
-- process ran the script and for how long it has been up.
--
-- KEYS[1]  lock key
-- KEYS[2]  fence key (fenced mode only; absent otherwise)
-- ARGV[1]  owner token
-- ARGV[2]  lock TTL in milliseconds (positive integer)
-- ARGV[3]  "1": report the server's run_id and uptime (restart quarantine on); "0" or absent: do not
--
-- Returns a status row (luakit's reply convention):
--   {1}                   acquired (unfenced)
--   {1, counter}          acquired (fenced); counter is the fence key's value as a decimal string,
--                         "0" when the fence key is absent
--   ... , run_id, uptime  with ARGV[3] = "1", every acquired reply above ends with INFO server's
--                         run_id (40 hex characters) and uptime_in_seconds (a decimal string)
--   {0}                   another owner (or this owner, from an earlier attempt) holds the lock; nothing written
--   {-4, reason}          fenced mode: the fence key is unusable (luakit_fence_read's reasons:
--                         "wrongtype", "expiring", "negative", "malformed"); nothing written
-- A server whose INFO server lacks run_id or uptime_in_seconds (with ARGV[3] = "1") gets the error
-- reply "COORDKIT redlock: INFO server lacks run_id or uptime_in_seconds", nothing written.
--
-- INFO runs before any write, so a user whose ACL forbids it gets the NOPERM error with nothing
-- written. Redis 7.0+ and Valkey 8+ allow INFO in scripts (it is not flagged noscript), also before
-- writes (scripts replicate their effects).
-- Complexity: O(1) (INFO server formats a fixed set of fields).
-- ACL: SET, INFO (quarantine on) and TYPE, PTTL, GET (fenced). SET NX is this script's only write and
-- its last command, but a fenced acquisition runs fence.lua (GET, TYPE, SET, PTTL, GET) after it: the
-- checks below (all kept) refuse the whole acquisition before the lock is written.
luakit_acl({'set', KEYS[1]})
if ARGV[3] == '1' then
  luakit_acl({'info', 'server'})
end
if #KEYS > 1 then
  luakit_acl({'type', KEYS[2]}, {'pttl', KEYS[2]}, {'get', KEYS[2]})
end
local run, up
if ARGV[3] == '1' then
  local info = redis.call('INFO', 'server')
  run = string.match(info, 'run_id:(%x+)')
  up = string.match(info, 'uptime_in_seconds:(%d+)')
  if not run or not up then
    return redis.error_reply('COORDKIT redlock: INFO server lacks run_id or uptime_in_seconds')
  end
end
local fence = '0'
if #KEYS > 1 then
  local reason
  fence, reason = luakit_fence_read(KEYS[2])
  if not fence then
    return {-4, reason}
  end
end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {0}
end
local out = {1}
if #KEYS > 1 then
  out[#out + 1] = fence
end
if run then
  out[#out + 1] = run
  out[#out + 1] = up
end
return out
