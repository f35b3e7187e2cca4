-- fair_cancel: a waiter leaves the queue (its wait ended, or the owner-checked cleanup of an attempt
-- whose outcome is unknown). It removes the waiter's entry, key and grant list and, when a grant reached it
-- after it stopped waiting (the lease holds its owner token), hands the lease on to the next live
-- waiter, so no lease is stranded and no waiter lost.
--
-- KEYS as in prelude.lua: lease, fence, queue, waiter key prefix.
-- ARGV[1]  owner token
-- ARGV[2]  lease TTL in ms and ARGV[3] wait slice in ms, as queued (the entry is '<owner>:<ttl>:<slice>')
--
-- Returns a status alone: 1 a lease of this owner was passed on (or deleted), -1 this owner held
-- nothing (its entry, if any, removed), -2 another owner holds the lease (its entry, if any, removed).
luakit_acl({'lrem', KEYS[3]}, {'del', KEYS[4]}, {'lpop', KEYS[3]}, {'lpush', KEYS[3]}, {'del', KEYS[1]}, {'set', KEYS[1]}, {'incr', KEYS[2]}, {'pttl', KEYS[2]}, {'get', KEYS[2]}, {'set', KEYS[2]}, {'lpush', KEYS[4]}, {'pexpire', KEYS[4]}, {'del', KEYS[4]})

redis.call('LREM', KEYS[3], 0, ARGV[1] .. ':' .. ARGV[2] .. ':' .. ARGV[3])
redis.call('DEL', KEYS[4] .. ARGV[1], KEYS[4] .. ARGV[1] .. ':grant')
return fair_pass_on(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1])
