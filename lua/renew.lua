-- renew.lua: renews the leases of requests still in flight (see
-- concurrent.lua), each until a lease's length from now: a lease that
-- expired or was given back is not made again.
--
-- KEYS     one key of a Concurrent limit.
-- ARGV     the lease's length in us, then the ids of the leases to renew.
-- Reply    the number of leases renewed.

local function renew()
  local now, lease, renewed = clock(), tonumber(ARGV[1]), 0
  for i = 2, #ARGV do
    renewed = renewed + redis.call('ZADD', KEYS[1], 'XX', 'GT', 'CH', now + lease, ARGV[i])
  end
  if renewed > 0 then
    redis.call('PEXPIRE', KEYS[1], ceil_div(lease, 1000))
  end
  return renewed
end
