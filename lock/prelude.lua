-- The lock's prelude: functions the fair lock's scripts share. luakit.MustLoad puts in front of each
-- script the ones it calls (see luakit.Prelude); no script runs this file on its own.
--
-- The fair lock's keys, all in one Cluster slot (the name's hash tag):
--   KEYS[1]  lease key: a string holding the owner token, with a PX expiry (the plain lock's)
--   KEYS[2]  fence key: the persistent counter (the plain lock's)
--   KEYS[3]  queue key: a list of waiter entries '<owner>:<ttl ms>', oldest first
--   KEYS[4]  waiter key prefix: the waiter with owner token o blocks on the stream KEYS[4] .. o, which
--            exists while it waits (its expiry is the end of its wait slice) and gets its grant, an
--            entry {t = <fencing token>}. The streams are derived in the scripts, in the slot of
--            KEYS[4], which is declared for the slot check and ACL key patterns.

-- fair_token formats a token from luakit_fence_next as a decimal string.
local function fair_token(token)
  if type(token) == 'number' then
    return string.format('%d', token)
  end
  return token
end

-- fair_grant hands the lease on to the first live waiter of the queue: it pops entries until one's
-- stream still exists (a waiter whose slice ended without renewal died or gave up, and is skipped),
-- appends the grant to that stream (XADD NOMKSTREAM: nothing is created for a dead waiter), and sets
-- the lease to the waiter's owner token with its TTL. The token is issued once, before the first
-- entry is tried (a skipped waiter's token is not reused by anyone else: tokens stay strictly
-- increasing, with a gap when every waiter was dead). With nobody live it deletes the lease. Returns
-- 1, or nil and the counter's reason (luakit_fence_next's) when the counter cannot issue a token:
-- then the lease is deleted and the popped entry put back, so that the waiters see the counter's
-- error on their next attempt. Commands on a grant: LPOP, INCR, PTTL (the counter guard), XADD, SET.
local function fair_grant(lease, fence, queue, prefix)
  local token
  while true do
    local e = redis.call('LPOP', queue)
    if not e then
      redis.call('DEL', lease)
      return 1
    end
    local sep = string.find(e, ':', 1, true)
    if sep then
      local owner = string.sub(e, 1, sep - 1)
      if not token then
        local t, reason = luakit_fence_next(fence)
        if not t then
          redis.call('LPUSH', queue, e)
          redis.call('DEL', lease)
          return nil, reason
        end
        token = fair_token(t)
      end
      if redis.call('XADD', prefix .. owner, 'NOMKSTREAM', '*', 't', token) then
        redis.call('SET', lease, owner, 'PX', string.sub(e, sep + 1))
        return 1
      end
    end
  end
end

-- fair_enqueue appends owner's entry to the queue and creates its stream with a presence entry,
-- expiring at the end of the slice (ms); returns the presence entry's id, from which the waiter reads.
local function fair_enqueue(queue, prefix, owner, ttl, slice)
  local w = prefix .. owner
  redis.call('RPUSH', queue, owner .. ':' .. ttl)
  local id = redis.call('XADD', w, '*', 'q', '1')
  redis.call('PEXPIRE', w, slice)
  return id
end
