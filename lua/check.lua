-- check.lua: names the commands the store needs that this server or its
-- ACL user refuses. Each is called in a form that passes the ACL check and
-- then fails or changes nothing: on a key that does not exist, or with an
-- argument that is not a number. So the check is safe on any server, and
-- it writes nothing.
--
-- KEYS     keys that do not exist; the first is the one the calls use.
--          (On a cluster node, keys of several slots make the run fail
--          with CROSSSLOT or MOVED: the client is not a cluster client.)
-- ARGV     the commands to check, in lower case.
-- Reply    the refused ones, one per line: the command, a space, and
--          "denied" (the user may not run it), "unknown" (the server has
--          renamed or disabled it) or "key" (the user may not use the
--          store's keys); empty when nothing is refused.

local k = KEYS[1]
local forms = {
  ping = {},
  time = {},
  del = {k},
  get = {k},
  set = {k, 'v', 'PX', 'x'}, -- not a number: fails before writing
  pttl = {k},
  pexpire = {k, '1000'},
  incrby = {k, 'x'},
  decrby = {k, 'x'},
  zadd = {k, 'x', 'm'},
  zcard = {k},
  zcount = {k, '1', '0'},
  zrange = {k, '0', '-1'},
  zrangebyscore = {k, '1', '0'},
  zrem = {k, 'x'},
  zremrangebyrank = {k, '1', '0'},
  zremrangebyscore = {k, '1', '0'},
  zscore = {k, 'm'},
  hdel = {k, 'f'},
  hexists = {k, 'f'},
  hget = {k, 'f'},
  hgetall = {k},
  hlen = {k},
  hincrby = {k, 'f', 'x'},
  hmget = {k, 'f'},
  hset = {k, 'f', 'v', 'g'}, -- an odd count of fields and values
}

local refused = {}
for _, name in ipairs(ARGV) do
  local form = forms[name]
  if form then
    local reply = redis.pcall(name, unpack(form))
    if type(reply) == 'table' and reply.err then
      local e = string.lower(reply.err)
      local why
      if string.find(e, 'unknown', 1, true) and string.find(e, 'command', 1, true) then
        why = 'unknown'
      elseif string.find(e, 'key', 1, true) and (string.find(e, 'access', 1, true) or string.find(e, 'permission', 1, true)) then
        why = 'key'
      elseif string.find(e, 'permission', 1, true) or string.find(e, "can't run", 1, true) or string.find(e, 'noperm', 1, true) then
        why = 'denied'
      end
      if why then
        refused[#refused + 1] = name .. ' ' .. why
      end
    end
  end
end
return table.concat(refused, '\n')
