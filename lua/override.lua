-- override.lua: a namespace's overrides of its limits, read or changed in
-- one run (see the package admin).
--
-- KEYS[1]  the overrides: a hash with a field per override, its policy and
--          key joined by a newline, holding the override; and the field
--          "v", the version, which every change raises, and which starts
--          from Redis's time in microseconds, so that a hash made anew
--          (after a restart that lost it) never has a version read before.
-- ARGV     the operation, then its arguments:
--            "read", the version known, the life in ms;
--            "set", the field, the override, the life, the most overrides;
--            "mode", the field, "shadow", "enforced" or "own", the life,
--            the most overrides: the override's shadow or enforcement set,
--            or neither ("own": the limit's own, and an override left with
--            nothing else goes), and the rest of it kept (a new one holds
--            that alone); an unlimited or blocked override fails with
--            "ratelimit: override unlimited or blocked";
--            "del", the field, the life.
--          Each renews the hash's life: a read when less than half of it
--          is left, a change always.
-- Reply    read: the version, then, when it is not the one known, every
--          field and value but the version's. set, mode and del: the
--          version after the change (a del of nothing changes nothing). A
--          set or mode of a new field in a hash that holds the most fails
--          with "ratelimit: overrides full".

local key, op = KEYS[1], ARGV[1]

local function renew(life)
  redis.call('PEXPIRE', key, life)
end

local function bump()
  if redis.call('HEXISTS', key, 'v') == 0 then
    local t = redis.call('TIME')
    redis.call('HSET', key, 'v', t[1] .. string.format('%06d', tonumber(t[2])))
  end
  return redis.call('HINCRBY', key, 'v', 1)
end

if op == 'read' then
  local known, life = ARGV[2], tonumber(ARGV[3])
  local version = redis.call('HGET', key, 'v') or '0'
  local ttl = redis.call('PTTL', key)
  if ttl >= 0 and ttl < life / 2 then
    renew(life)
  end
  if version == known then
    return { version }
  end
  local reply = { version }
  local all = redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    if all[i] ~= 'v' then
      reply[#reply + 1] = all[i]
      reply[#reply + 1] = all[i + 1]
    end
  end
  return reply
end

local field, version = ARGV[2], nil
if op == 'set' or op == 'mode' then
  local value, life, most = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
  local old = redis.call('HGET', key, field)
  if not old then
    local held = redis.call('HLEN', key) - redis.call('HEXISTS', key, 'v')
    if held >= most then
      return redis.error_reply('ratelimit: overrides full')
    end
  end
  if op == 'mode' then
    -- The override's JSON, as the package admin writes it; a value of
    -- before it ("quota" -1 unlimited, -2 blocked, 0 the limit's,
    -- "enforce") is read too, and written anew.
    local o = old and cjson.decode(old) or {}
    if o.unlimited or o.blocked or (tonumber(o.quota) or 0) < 0 then
      return redis.error_reply('ratelimit: override unlimited or blocked')
    end
    o.shadow, o.enforced, o.enforce = nil, nil, nil
    if o.quota == 0 then
      o.quota = nil
    end
    if value ~= 'own' then
      o[value] = true
    end
    value = nil -- nothing left: the limit's own
    if next(o) ~= nil then
      value = cjson.encode(o)
    end
  end
  if value then
    redis.call('HSET', key, field, value)
  elseif not old or redis.call('HDEL', key, field) == 0 then
    return tonumber(redis.call('HGET', key, 'v') or '0')
  end
  version = bump()
  renew(life)
elseif op == 'del' then
  local life = tonumber(ARGV[3])
  if redis.call('HDEL', key, field) == 1 then
    version = bump()
    renew(life)
  else
    version = tonumber(redis.call('HGET', key, 'v') or '0')
  end
else
  return redis.error_reply('ratelimit: override.lua: unknown operation ' .. tostring(op))
end
return version
