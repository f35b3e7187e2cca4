-- The ACL preamble: MustLoad puts it before every script whose source calls luakit_acl.
--
-- luakit_acl(cmd1, cmd2, ...) takes one table per command the script may run, each the command name
-- followed by the arguments it will be given (keys where the command takes keys, any value of the
-- right shape elsewhere), and checks each with redis.acl_check_cmd (Redis 7.0 and later, every
-- Valkey). The first one the caller's user may not run raises
--   NOPERM this user has no permissions to run the '<cmd>' command this script needs
-- Call it before the script's first write, so that a refused script writes nothing. MustLoad writes
-- the checks out in front of each call (if not (redis.acl_check_cmd(...) and ...) then luakit_acl(...)
-- end), so a permitted script costs one ACL lookup per command and this function runs only to name
-- the command refused.
local function luakit_acl(...)
  for i = 1, select('#', ...) do
    local c = select(i, ...)
    if not redis.acl_check_cmd(unpack(c)) then
      return error({err = "NOPERM this user has no permissions to run the '" .. string.lower(c[1]) ..
        "' command this script needs"})
    end
  end
end
