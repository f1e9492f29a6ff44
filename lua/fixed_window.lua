-- fixed_window.lua: a counter that the window's first request creates with a
-- TTL of one window. When the key expires, the next request opens a new
-- window; Redis's expiry is the clock, so this algorithm never reads TIME.
-- Up to 2 x quota can pass across a boundary: quota at the end of one window
-- and quota again at the start of the next.
--
-- State    the key, a string holding the count, with a TTL.
-- Params   a = quota, b = window in ms, c unused.
-- s1, s2   the key's PTTL (-2 missing, -1 no TTL: a foreign key), and the
--          time until the window closes; for CHARGE, s1 is the time
--          admitted.

-- reset turns a PTTL into the time until the window closes. Expiry has
-- millisecond resolution and a key lives through the millisecond its PTTL
-- names, so the window may close up to 1ms later.
local function fixed_window_reset(ttl, window)
  if ttl >= 0 then
    return math.min(ttl + 1, window) * 1000
  end
  return window * 1000
end

-- fixed_window_window turns a PTTL into the effective window: the time
-- left in the window rounded down to the millisecond, which the window
-- outlasts; a whole window when none is open (or the key had no TTL,
-- which gets one now).
local function fixed_window_window(ttl, window)
  if ttl >= 0 then
    return math.min(ttl, window) * 1000
  end
  return window * 1000
end

algorithms.f = function(phase, key, cost, quota, window, _, now, ttl, reset)
  if phase == CHARGE then
    -- A window's start is not stored: units admitted within the last
    -- window count in the current one, which may hold them longer than
    -- their own window would have.
    local at = ttl
    if at > now - window * 1000 then
      if redis.call('INCRBY', key, cost) == cost or redis.call('PTTL', key) == -1 then
        redis.call('PEXPIRE', key, window)
      end
    end
    return 0
  elseif phase == DECIDE then
    -- Take first, give back on denial: two calls instead of four.
    local count = redis.call('INCRBY', key, cost)
    if count == cost then
      redis.call('PEXPIRE', key, window)
      return 1, quota - count, window * 1000, 0, window * 1000
    end
    ttl = redis.call('PTTL', key)
    if ttl == -1 then
      redis.call('PEXPIRE', key, window)
    end
    reset = fixed_window_reset(ttl, window)
    if count <= quota then
      return 1, quota - count, reset, 0, fixed_window_window(ttl, window)
    end
    redis.call('DECRBY', key, cost)
    return 0, math.max(quota - count + cost, 0), reset, reset, fixed_window_window(ttl, window)
  elseif phase == CHECK then
    local count, reset = 0, 0
    ttl = -2
    local v = redis.call('GET', key)
    if v then
      count = tonumber(v)
      if not count then
        error('ratelimit: the key of a fixed-window limit does not hold its counter')
      end
      ttl = redis.call('PTTL', key)
      reset = fixed_window_reset(ttl, window)
    end
    if count + cost <= quota then
      return true, quota - count, 0, ttl, reset
    end
    return false, math.max(quota - count, 0), reset, ttl, reset
  elseif phase == PEEK then
    -- SETTLE's reset, without the PEXPIRE it gives a key that has no TTL.
    local ok, remaining, retry
    ok, remaining, retry, ttl, reset = algorithms.f(CHECK, key, cost, quota, window)
    return ok and 1 or 0, remaining, reset, retry, fixed_window_window(ttl, window)
  elseif phase == COMMIT then
    redis.call('INCRBY', key, cost)
    if ttl < 0 then
      redis.call('PEXPIRE', key, window)
      return window * 1000, window * 1000
    end
    return reset, fixed_window_window(ttl, window)
  end
  if ttl == -1 then
    redis.call('PEXPIRE', key, window)
  end
  return reset, fixed_window_window(ttl, window)
end
