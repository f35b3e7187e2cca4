-- holders: list the named leases of a hash with their remaining life. Read-only. Owner tokens (the field
-- values) are never returned.
--
-- KEYS[1]  hash key
--
-- Returns the status row {1, field1, pttl1, field2, pttl2, ...} (luakit's reply convention): every
-- unexpired field with its HPTTL in ms (-1 for a field without expiry). An absent key gives {1}. O(N) in the number of fields; HPTTL is sent
-- in batches of 512 fields to stay within Lua's stack limit.
local fields = redis.call('HKEYS', KEYS[1])
local out = {1}
local n = #fields
local i = 1
while i <= n do
  local j = math.min(i + 511, n)
  local batch = {}
  for k = i, j do
    batch[#batch + 1] = fields[k]
  end
  local ttls = redis.call('HPTTL', KEYS[1], 'FIELDS', #batch, unpack(batch))
  for k = 1, #batch do
    if ttls[k] ~= -2 then
      out[#out + 1] = batch[k]
      out[#out + 1] = ttls[k]
    end
  end
  i = j + 1
end
return out
