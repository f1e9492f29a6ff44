-- charge.lua: brings to Redis what an in-process fallback decided while
-- Redis was unavailable, for one key: first the resets made meanwhile,
-- then the units admitted since, each at the time it was admitted, so that
-- later decisions count them as if Redis had made them. The store runs
-- decide.lua, the four algorithm files, then this file.
--
-- KEYS     the keys of one client key's limits; they share one {hash tag}.
-- ARGV     for each key, in order: its algorithm code and parameters a, b,
--          c; 1 to delete its state first, else 0; m, the number of
--          admissions; then m pairs: the time admitted (Redis's
--          microseconds) and the units taken.
-- Reply    1.

local function charge()
  local now, a = clock(), 1
  for k = 1, #KEYS do
    local code, pa, pb, pc = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    local m = tonumber(ARGV[a + 5])
    if ARGV[a + 4] == '1' then
      redis.call('DEL', KEYS[k])
    end
    for i = 1, m do
      -- A time measured a little ahead of Redis's clock counts as now.
      local t = math.min(tonumber(ARGV[a + 4 + 2 * i]), now)
      algorithms[code](CHARGE, KEYS[k], tonumber(ARGV[a + 5 + 2 * i]), pa, pb, pc, now, t)
    end
    a = a + 6 + 2 * m
  end
  return 1
end
