-- charge.lua: brings to Redis what an in-process fallback decided while
-- Redis was unavailable, for one key: first the resets made meanwhile,
-- then the units admitted since, each at the time it was admitted, so that
-- later decisions count them as if Redis had made them. The store runs
-- decide.lua, the four algorithm files, then this file.
--
-- Strikes and bans decided in process are not brought; a reset made
-- meanwhile forgets the key's ban on Redis too.
--
-- Each charge carries an identity, recorded in the same run: a charge
-- whose answer was lost is sent again, and its second run changes
-- nothing. The record lasts as long as the longest horizon of its limits
-- (a window, or a token bucket's refill from empty), after which the
-- admissions it brought are too old to count anyway.
--
-- KEYS     the key that records the charge's identity, then the keys of
--          one client key's limits, then, when a reset made meanwhile is
--          to forget the key's ban too, its ban key; they share one
--          {hash tag}.
-- ARGV     how long the identity is recorded, in ms; then for each
--          limit's key, in order: its algorithm code and parameters a, b,
--          c; 1 to delete its state first, else 0; m, the number of
--          admissions; then m pairs: the time admitted (Redis's
--          microseconds) and the units taken. Read only through
--          charge_args, charge_limit and charge_admission.
-- Reply    1, or 0 when Redis had run this charge already: nothing
--          changed.

-- charge_args returns how long the identity is recorded and where the
-- first limit's entries start, for charge_limit.
local function charge_args()
  return ARGV[1], 2
end

-- charge_limit returns, for the limit whose entries start at ARGV[j],
-- its code, parameters a, b, c, whether its state is deleted first, its
-- number of admissions, and where the next limit's entries start, past
-- #ARGV after the last.
local function charge_limit(j)
  local code, pa, pb, pc = limit_args(j, 1)
  local m = tonumber(ARGV[j + 5])
  return code, pa, pb, pc, ARGV[j + 4] == '1', m, j + 6 + 2 * m
end

-- charge_admission returns the time and units of admission i of the
-- limit whose entries start at ARGV[j].
local function charge_admission(j, i)
  return tonumber(ARGV[j + 4 + 2 * i]), tonumber(ARGV[j + 5 + 2 * i])
end

local function charge()
  local now, k = clock(), 1
  local ttl, first = charge_args()
  -- A calendar whose periods do not hold Redis's time fails before any
  -- write, so that the store may ask again.
  local j = first
  while j <= #ARGV do
    local code, _, pb, pc, _, _, following = charge_limit(j)
    if string.lower(kind(code)) == 'c' then
      calendar_period(pb, pc, now)
    end
    j = following
  end
  if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ttl) then
    return 0
  end
  j = first
  while j <= #ARGV do
    k = k + 1
    local code, pa, pb, pc, reset, m, following = charge_limit(j)
    if reset then
      redis.call('DEL', KEYS[k])
    end
    for i = 1, m do
      local t, units = charge_admission(j, i)
      -- A time measured a little ahead of Redis's clock counts as now.
      algorithm(code)(CHARGE, KEYS[k], units, pa, pb, pc, now, math.min(t, now))
    end
    j = following
  end
  if k < #KEYS then
    redis.call('DEL', KEYS[#KEYS])
  end
  return 1
end
