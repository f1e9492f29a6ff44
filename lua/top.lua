-- top.lua: the keys each instance's Limiters denied most, per policy,
-- over the last minute and the last hour (see the package admin).
--
-- KEYS[1]  a hash with a field per instance, window and policy, joined
--          by newlines, holding the time it was written (ms, Redis's
--          clock), "|", and that instance's summary of its denials.
-- ARGV     the operation, then its arguments:
--            "put", the life in ms, the age in ms past which a field is
--            gone, then fields and summaries: they replace those fields,
--            stamped now, and the fields older than the age go;
--            "get", the age in ms past which a field is gone, then the
--            window and policy: the fields of that window and policy.
-- Reply    put: the fields held. get: each field's instance and summary,
--          in turn, for the fields not older than the age.

local key, op = KEYS[1], ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

if op == 'put' then
  local life, age = tonumber(ARGV[2]), tonumber(ARGV[3])
  for i = 4, #ARGV, 2 do
    redis.call('HSET', key, ARGV[i], now .. '|' .. ARGV[i + 1])
  end
  local all = redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    local at = tonumber(string.match(all[i + 1], '^(%d+)|'))
    if not at or at < now - age then
      redis.call('HDEL', key, all[i])
    end
  end
  redis.call('PEXPIRE', key, life)
  return redis.call('HLEN', key)
end

if op == 'get' then
  local age, suffix = tonumber(ARGV[2]), '\n' .. ARGV[3] .. '\n' .. ARGV[4]
  local reply = {}
  local all = redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    local f, v = all[i], all[i + 1]
    if string.sub(f, -#suffix) == suffix then
      local at, summary = string.match(v, '^(%d+)|(.*)$')
      if at and tonumber(at) >= now - age then
        reply[#reply + 1] = string.sub(f, 1, #f - #suffix)
        reply[#reply + 1] = summary
      end
    end
  end
  return reply
end

return redis.error_reply('ratelimit: top.lua: unknown operation ' .. tostring(op))
