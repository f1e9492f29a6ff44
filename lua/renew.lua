-- renew.lua: renews the leases of requests still in flight (see
-- concurrent.lua), each until a lease's length from now: a lease that
-- expired or was given back is not made again.
--
-- KEYS     one key of a Concurrent limit.
-- ARGV     the lease's length in us, then the ids of the leases to renew,
--          which renew names at its top.
-- Reply    the number of leases renewed.

local function renew()
  local key, lease, ids = KEYS[1], tonumber(ARGV[1]), 2 -- ids: ARGV[2] on
  local now, renewed = clock(), 0
  for i = ids, #ARGV do
    renewed = renewed + redis.call('ZADD', key, 'XX', 'GT', 'CH', now + lease, ARGV[i])
  end
  if renewed > 0 then
    redis.call('PEXPIRE', key, ceil_div(lease, 1000))
  end
  return renewed
end
