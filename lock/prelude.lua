-- The lock's prelude: functions the fair lock's scripts share. luakit.MustLoad puts in front of each
-- script the ones it calls (see luakit.Prelude); no script runs this file on its own.
--
-- The fair lock's keys, all in one Cluster slot (the name's hash tag):
--   KEYS[1]  lease key: a string holding the owner token, with a PX expiry (the plain lock's)
--   KEYS[2]  fence key: the persistent counter (the plain lock's)
--   KEYS[3]  queue key: a list of waiter entries '<owner>:<ttl ms>:<slice ms>', oldest first
--   KEYS[4]  waiter key prefix: the waiter with owner token o has two keys, derived in the scripts (in
--            the slot of KEYS[4], which is declared for the slot check and ACL key patterns):
--            KEYS[4] .. o, a string that exists while it waits (its expiry is the end of its wait
--            slice: a release skips an entry whose key is gone), and KEYS[4] .. o .. ':grant', a list
--            that the waiter blocks on (BLPOP) and that a grant creates with one element
--            '<fencing token>:<slice ms>', expiring a slice after the grant.

-- fair_token formats a token from luakit_fence_next as a decimal string.
local function fair_token(token)
  if type(token) == 'number' then
    return string.format('%d', token)
  end
  return token
end

-- fair_grant hands the lease on to the first live waiter of the queue: it pops entries until one's
-- waiter key still exists (a waiter whose slice ended without renewal died or gave up, and is
-- skipped), deletes that key (the waiter is no longer queued), pushes the grant onto the waiter's
-- grant list (waking its BLPOP), which expires a slice later when unread, and sets the lease to the
-- waiter's owner token with its TTL. The token is issued once, before the first entry is tried (a
-- skipped waiter's token is not reused by anyone else: tokens stay strictly increasing, with a gap
-- when every waiter was dead). With nobody live it deletes the lease. Returns 1, or nil and the
-- counter's reason (luakit_fence_next's) when the counter cannot issue a token: then the lease is
-- deleted and the popped entry put back, so that the waiters see the counter's error on their next
-- attempt. Commands on a grant: LPOP, INCR, PTTL (the counter guard), DEL, LPUSH, PEXPIRE (the grant
-- lives a slice, see fair_revoke), SET.
local function fair_grant(lease, fence, queue, prefix)
  local token
  while true do
    local e = redis.call('LPOP', queue)
    if not e then
      redis.call('DEL', lease)
      return 1
    end
    local a = string.find(e, ':', 1, true)
    local b = a and string.find(e, ':', a + 1, true)
    if b then
      local owner = string.sub(e, 1, a - 1)
      if not token then
        local t, reason = luakit_fence_next(fence)
        if not t then
          redis.call('LPUSH', queue, e)
          redis.call('DEL', lease)
          return nil, reason
        end
        token = fair_token(t)
      end
      local w = prefix .. owner
      if redis.call('DEL', w) == 1 then
        local slice = string.sub(e, b + 1)
        local g = w .. ':grant'
        redis.call('LPUSH', g, token .. ':' .. slice)
        -- an unread grant lives a full slice, so that it can be taken back (fair_revoke)
        redis.call('PEXPIRE', g, slice)
        redis.call('SET', lease, owner, 'PX', string.sub(e, a + 1, b - 1))
        return 1
      end
    end
  end
end

-- fair_enqueue appends owner's entry to the queue and creates its waiter key, expiring at the end of
-- the slice (ms); returns the queue's length after the append.
local function fair_enqueue(queue, prefix, owner, ttl, slice)
  local n = redis.call('RPUSH', queue, owner .. ':' .. ttl .. ':' .. slice)
  redis.call('SET', prefix .. owner, '1', 'PX', slice)
  return n
end

-- fair_revoke takes the lease back from a grantee that died before reading its grant: when the lease's
-- owner has a grant list (the waiter never popped its grant) whose grant is older than a quarter of
-- the waiter's slice by the server's clock (the list expires a full slice after the grant, so its age
-- is the slice less its PTTL; other waiters renew every half slice), the list and the lease are
-- deleted and the lease is granted on (fair_grant). A live grantee pops a grant within one renewal
-- round trip (it is blocked on the list, or renews and blocks again at once), and a grantee whose list
-- was deleted finds no grant when it reads or renews, so a lease is never taken from a waiter that
-- read its grant. Returns true when it revoked.
local function fair_revoke(lease, fence, queue, prefix)
  local holder = redis.call('GET', lease)
  if not holder then
    return false
  end
  local g = prefix .. holder .. ':grant'
  local grant = redis.call('LINDEX', g, 0)
  if not grant then
    return false
  end
  local slice = tonumber(string.match(grant, ':(%d+)$'))
  if not slice or slice - redis.call('PTTL', g) <= slice / 4 then
    return false
  end
  redis.call('DEL', g)
  redis.call('DEL', lease)
  fair_grant(lease, fence, queue, prefix)
  return true
end

-- fair_counter_reply turns the reason fair_grant or luakit_fence_next gave for a counter that cannot
-- issue a token into the script's reply: the server's own error reply (a table) as it is, else
-- {-4, reason}.
local function fair_counter_reply(reason)
  if type(reason) == 'table' then
    return reason
  end
  return {-4, reason}
end

-- fair_take sets the lease to owner for ttl ms and issues the next fencing token; on a counter that
-- cannot issue one the lease is deleted again and the reply is returned as the second value.
local function fair_take(lease, fence, owner, ttl)
  redis.call('SET', lease, owner, 'PX', ttl)
  local token, reason = luakit_fence_next(fence)
  if not token then
    redis.call('DEL', lease)
    return nil, fair_counter_reply(reason)
  end
  return token
end

-- fair_pass_on hands the lease held by owner on to the next live waiter (or deletes it) and returns
-- the release status: 1, or luakit_owner's -1 (absent) or -2 (another owner; nothing written), or the
-- server's error reply from the counter. A counter that cannot issue a token still releases (1).
local function fair_pass_on(lease, fence, queue, prefix, owner)
  local s = luakit_owner(lease, owner)
  if s ~= 1 then
    return s
  end
  local ok, reason = fair_grant(lease, fence, queue, prefix)
  if not ok and type(reason) == 'table' then
    return reason
  end
  return 1
end
