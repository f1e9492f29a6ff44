-- token_bucket.lua: a bucket of `capacity` that refills continuously and
-- starts full. To keep refills exact, the level is a fixed-point integer: a
-- token is `unit` units and the bucket gains `rate` units per microsecond
-- (see Limit.TokenUnits). A request of cost n passes when n tokens are in the
-- bucket; a denial takes nothing. The key expires when the bucket is full
-- again, since a missing key means a full bucket.
--
-- State    the key, a hash: l = level in units, t = last update in us.
-- Params   a = capacity in units, b = units per token, c = units per us.
-- s1, s2   the level now, the time of this update; for CHARGE, s1 is the
--          time admitted.
-- token_bucket_at returns the bucket's level at time t and the time of
-- its update: refilled for the time since the last update. A clock that
-- went back refills nothing, and the update keeps the later time.
local function token_bucket_at(key, capacity, rate, t)
  local v = redis.call('HMGET', key, 'l', 't')
  if not v[1] and not v[2] then
    return capacity, t
  end
  local level, last = tonumber(v[1]), tonumber(v[2])
  if not level or not last then
    error('ratelimit: the key of a token-bucket limit does not hold its bucket')
  end
  if t > last then
    if (t - last) * rate < capacity - level then
      level = level + (t - last) * rate
    else
      level = capacity
    end
    last = t
  end
  return math.min(level, capacity), last
end

algorithms.t = function(phase, key, cost, capacity, unit, rate, now, level, last)
  if phase == CHARGE then
    -- Replay the admission at its time: refill up to it, take cost. A
    -- bucket cannot go below empty, so a debt beyond that is not kept.
    local at = level
    level, last = token_bucket_at(key, capacity, rate, at)
    level = math.max(level - cost * unit, 0)
    redis.call('HSET', key, 'l', level, 't', last)
    -- A missing key means a full bucket: keep it until it is full again.
    local full = last + ceil_div(capacity - level, rate)
    redis.call('PEXPIRE', key, math.max(1, ceil_div(full - now, 1000)))
    return 0
  elseif phase == DECIDE then
    local ok, remaining, retry, l, t = algorithms.t(CHECK, key, cost, capacity, unit, rate, now)
    if ok then
      return 1, remaining - cost, algorithms.t(COMMIT, key, cost, capacity, unit, rate, now, l, t), 0
    end
    return 0, remaining, ceil_div(capacity - l, rate), retry
  elseif phase == CHECK then
    level, last = token_bucket_at(key, capacity, rate, now)
    local need = cost * unit
    if need <= level then
      return true, math.floor(level / unit), 0, level, last
    end
    return false, math.floor(level / unit), ceil_div(need - level, rate), level, last
  elseif phase == PEEK then
    local ok, remaining, retry
    ok, remaining, retry, level = algorithms.t(CHECK, key, cost, capacity, unit, rate, now)
    return ok and 1 or 0, remaining, ceil_div(capacity - level, rate), retry
  elseif phase == COMMIT then
    local rest = level - cost * unit
    redis.call('HSET', key, 'l', rest, 't', last)
    local reset = ceil_div(capacity - rest, rate)
    redis.call('PEXPIRE', key, math.max(1, ceil_div(reset, 1000)))
    return reset
  end
  return ceil_div(capacity - level, rate)
end
