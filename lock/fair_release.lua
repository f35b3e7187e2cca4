-- fair_release: release the fair lock for its owner, handing the lease on to the first live waiter.
--
-- KEYS as in prelude.lua: lease, fence, queue, waiter key prefix.
-- ARGV[1]  owner token
--
-- Returns a status alone: 1 released (granted to the next live waiter, or deleted when nobody waits;
-- also when the counter can no longer issue tokens: the lease is deleted and the waiters get the
-- counter's error on their next attempt), -1 no lease exists, -2 another owner holds it (nothing
-- written). Commands: GET, LPOP, DEL with nobody waiting; GET, LPOP, INCR, PTTL, DEL, LPUSH, PEXPIRE,
-- SET on a grant to a live waiter, plus LPOP and DEL per dead waiter skipped.
luakit_acl({'lpop', KEYS[3]}, {'lpush', KEYS[3]}, {'del', KEYS[1]}, {'set', KEYS[1]}, {'incr', KEYS[2]}, {'pttl', KEYS[2]}, {'get', KEYS[2]}, {'set', KEYS[2]}, {'lpush', KEYS[4]}, {'pexpire', KEYS[4]}, {'del', KEYS[4]})

return fair_pass_on(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1])
