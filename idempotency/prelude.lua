-- Idempotency's prelude: functions its scripts share. luakit.MustLoad puts in front of each script the
-- ones it calls (see luakit.Prelude); no script runs this file on its own. The claim hash's fields are
-- described in begin.lua.

-- idem_pending returns the status (luakit's reply convention) of the pending claim at key for owner
-- token and generation gen (token nil: any owner): 1 (ok) the key holds that pending claim; -1
-- (absent) no key (never claimed, expired, abandoned); -2 (not owner) a completed claim, another
-- owner's or another generation's; -3 (foreign) the key holds another Redis type. Reads TYPE and HMGET.
local function idem_pending(key, token, gen)
  local s = luakit_type(key, 'hash')
  if s ~= 1 then
    return s
  end
  local h = redis.call('HMGET', key, 's', 't', 'g')
  if h[1] ~= 'p' or (token and h[2] ~= token) or h[3] ~= gen then
    return -2
  end
  return 1
end
