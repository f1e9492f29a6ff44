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
--          microseconds) and the units taken.
-- Reply    1, or 0 when Redis had run this charge already: nothing
--          changed.

local function charge()
  local now, a, k = clock(), 2, 1
  -- A calendar whose periods do not hold Redis's time fails before any
  -- write, so that the store may ask again.
  while a <= #ARGV do
    if string.lower(kind(ARGV[a])) == 'c' then
      calendar_period(tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), now)
    end
    a = a + 6 + 2 * tonumber(ARGV[a + 5])
  end
  if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then
    return 0
  end
  a = 2
  while a <= #ARGV do
    k = k + 1
    local code, pa, pb, pc = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    local m = tonumber(ARGV[a + 5])
    if ARGV[a + 4] == '1' then
      redis.call('DEL', KEYS[k])
    end
    for i = 1, m do
      -- A time measured a little ahead of Redis's clock counts as now.
      local t = math.min(tonumber(ARGV[a + 4 + 2 * i]), now)
      algorithm(code)(CHARGE, KEYS[k], tonumber(ARGV[a + 5 + 2 * i]), pa, pb, pc, now, t)
    end
    a = a + 6 + 2 * m
  end
  if k < #KEYS then
    redis.call('DEL', KEYS[#KEYS])
  end
  return 1
end
