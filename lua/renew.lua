-- renew.lua: renews the slots of requests still in flight (see
-- concurrent.lua), each until a slot's life from now, or the holds of
-- one request in flight (see decide.lua's holds_read), each until
-- hold_life from now: a slot or a hold that lapsed or was given back is
-- not made again.
--
-- KEYS     one key of a Concurrent limit; or the holds keys of one
--          request, whose names end in "/h".
-- ARGV     the slot's life in us, then the ids of the slots to renew,
--          which renew names at its top; for holds, 0, then the request's
--          id.
-- Reply    the number of slots or holds renewed.

local function renew()
  local key, slot, ids = KEYS[1], tonumber(ARGV[1]), 2 -- ids: ARGV[2] on
  local now, renewed = clock(), 0
  if string.sub(key, -2) == '/h' then
    local id = ARGV[ids]
    for _, hk in ipairs(KEYS) do
      local v = redis.call('HGET', hk, id)
      if v then
        local units, expires = int_pair(v, 'ratelimit: a holds key does not hold reservations')
        if expires > now then
          redis.call('HSET', hk, id, int(units) .. ' ' .. int(now + hold_life))
          redis.call('PEXPIRE', hk, hold_life / 1000 + 1)
          renewed = renewed + 1
        end
      end
    end
    return renewed
  end
  for i = ids, #ARGV do
    renewed = renewed + redis.call('ZADD', key, 'XX', 'GT', 'CH', now + slot, ARGV[i])
  end
  if renewed > 0 then
    redis.call('PEXPIRE', key, ceil_div(slot, 1000))
  end
  return renewed
end
