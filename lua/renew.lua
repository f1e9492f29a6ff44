-- renew.lua: renews the slots of requests still in flight (see
-- concurrent.lua), each until a slot's life from now: a slot that
-- expired or was given back is not made again.
--
-- KEYS     one key of a Concurrent limit.
-- ARGV     the slot's life in us, then the ids of the slots to renew,
--          which renew names at its top.
-- Reply    the number of slots renewed.

local function renew()
  local key, slot, ids = KEYS[1], tonumber(ARGV[1]), 2 -- ids: ARGV[2] on
  local now, renewed = clock(), 0
  for i = ids, #ARGV do
    renewed = renewed + redis.call('ZADD', key, 'XX', 'GT', 'CH', now + slot, ARGV[i])
  end
  if renewed > 0 then
    redis.call('PEXPIRE', key, ceil_div(slot, 1000))
  end
  return renewed
end
