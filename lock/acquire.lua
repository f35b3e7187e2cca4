-- acquire: take the lease if it is free, issuing the next fencing token from the counter.
--
-- KEYS[1]  lease key: a string holding the owner token, with a PX expiry
-- KEYS[2]  fence key: the persistent counter (a string holding a non-negative int64, no expiry)
-- ARGV[1]  owner token (opaque bytes)
-- ARGV[2]  lease TTL in whole milliseconds (>= 1)
-- ARGV[3]  optional, "1": read the lease's PTTL first and answer {0, pttl} at once when it is held (a
--          waiter's first attempt, sent after CLIENT CACHING YES: the read arms tracking of the lease
--          key, and a held lock costs one command)
--
-- Returns one of (luakit's reply convention; a grant answers its token alone, as no array costs the
-- client an allocation on the lock's hot path):
--   token         acquired; token is the new counter value: an integer below 2^53, else the counter read
--                 back as a decimal string, because a Lua number is a double and cannot hold every int64
--                 above 2^53 (INCR's reply is returned only while it is exact)
--   {0, pttl}     busy: the lease is held; pttl is its remaining life in ms, -1 when it has no expiry
--   {-4, reason}  counter: the counter cannot issue a token (reason, first match: wrongtype, expiring,
--                 then negative, malformed or overflow) and the lease is free; the keyspace is as it was
--
-- The lease is taken first (SET NX PX), so a held lease is reported as held whatever the counter holds,
-- and a busy attempt writes nothing (SET NX does not write; no notification, no invalidation). Then the
-- prelude's luakit_fence_next issues the token: INCR checks the counter as it increments it (it refuses
-- another type, a value that is not the canonical decimal form of an int64 and the maximum int64,
-- writing nothing); a negative counter (INCR's reply <= 0) and an expiring one (PTTL >= 0 after INCR,
-- which keeps the TTL) are incremented, then the exact previous value is put back with SET KEEPTTL
-- (string arithmetic on the GET read-back, exact over the whole int64 range; no DECR, so the ACL needs
-- no command beyond the ones it already lists). On every failure the lease just set is deleted. The
-- script is atomic, so no client ever sees the transient state and the keyspace (values, DUMP, TTLs)
-- ends as it was; the transient writes are still writes: keyspace notifications (set and del on the
-- lease; incrby then set on a negative or expiring counter), invalidations of tracked readers of both
-- keys, and their effects replicated to replicas and the AOF. Only a corrupt counter (data the lock
-- never writes) pays this.
-- Commands on the common path: SET NX PX on the lease, INCR and PTTL on the counter; PTTL on the lease
-- only when it is held; GET of the counter only above 2^53. O(1).
-- ACL: PTTL, SET, DEL, INCR and GET. luakit_acl (below) checks, before anything else, every command
-- this script may run after its first write (the SET NX of the lease): a user the ACL refuses one of
-- them gets NOPERM and nothing is written. A refused PTTL or SET of the lease fails before any write
-- (the server's NOPERM error), so those two are not checked: each check costs server time on every
-- call.
luakit_acl({'del', KEYS[1]}, {'incr', KEYS[2]}, {'pttl', KEYS[2]}, {'get', KEYS[2]}, {'set', KEYS[2]})

if ARGV[3] == '1' then
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl ~= -2 then
    return {0, pttl}
  end
end

if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {0, redis.call('PTTL', KEYS[1])}
end

local token, reason = luakit_fence_next(KEYS[2])
if not token then
  redis.call('DEL', KEYS[1])
  if type(reason) == 'table' then
    return reason -- another INCR failure: the server's own error reply
  end
  return {-4, reason}
end
return token
