-- verify: report whether the owner still holds the named lease, at one instant. Read-only.
--
-- KEYS[1]  hash key
-- ARGV[1]  field
-- ARGV[2]  owner token
--
-- Returns the field's remaining life in ms (HPTTL; -1 when it has no expiry) when the owner holds it,
-- else -2. O(1).
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HPTTL', KEYS[1], 'FIELDS', 1, ARGV[1])[1]
end
return -2
