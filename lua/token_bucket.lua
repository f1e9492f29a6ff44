-- token_bucket.lua: a bucket of `capacity` that refills continuously and
-- starts full. To keep refills exact, the level is a fixed-point integer: a
-- token is `unit` units and the bucket gains `rate` units per microsecond
-- (see Limit.TokenUnits). A request of cost n passes when n tokens are in the
-- bucket; a denial takes nothing. The key expires when the bucket is full
-- again, since a missing key means a full bucket.
--
-- Usage charged after a response (see decide.lua's CHARGE) may take the
-- level below zero: a debt, which the refill pays back before a request
-- passes again.
--
-- State    the key, a string: the level in units and the time of the last
--          update in us, as two integers separated by a space; one value,
--          so that an update is one SET with its expiry.
-- Params   a = capacity in units, b = units per token, c = units per us.
-- s1, s2   the level now, the time of this update; for CHARGE, s1 is the
--          time admitted.
-- token_bucket_at returns the bucket's level at time t and the time of
-- its update: refilled for the time since the last update. A clock that
-- went back refills nothing, and the update keeps the later time.
local function token_bucket_at(key, capacity, rate, t)
  local v = redis.call('GET', key)
  if not v then
    return capacity, t
  end
  local level, last = int_pair(v, 'ratelimit: the key of a token-bucket limit does not hold its bucket')
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

-- token_bucket_set stores the bucket, to expire when it is full again at
-- the latest, since a missing key means a full bucket; full is that time
-- in us, now the time of the decision.
local function token_bucket_set(key, level, last, full, now)
  redis.call('SET', key, string.format('%d %d', level, last), 'PX', math.max(1, ceil_div(full - now, 1000)))
end

-- token_bucket_window is the effective window of a bucket at level: the
-- time to refill, from what is left once every whole token is spent, one
-- more token; from a bucket in debt (below empty), its first token.
local function token_bucket_window(level, unit, rate)
  if level < 0 then
    return ceil_div(unit - level, rate)
  end
  return ceil_div((math.floor(level / unit) + 1) * unit - level, rate)
end

algorithms.t = function(phase, key, cost, capacity, unit, rate, now, level, last)
  if phase == CHARGE then
    -- Replay the admission at its time: refill up to it, take cost, below
    -- empty if need be: a bucket in debt refills it before it admits again.
    local at = level
    level, last = token_bucket_at(key, capacity, rate, at)
    level = level - cost * unit
    token_bucket_set(key, level, last, last + ceil_div(capacity - level, rate), now)
    return 0
  elseif phase == DECIDE then
    local ok, remaining, retry, l, t = algorithms.t(CHECK, key, cost, capacity, unit, rate, now)
    if ok then
      local reset, after = algorithms.t(COMMIT, key, cost, capacity, unit, rate, now, l, t)
      return 1, remaining - cost, reset, 0, after
    end
    return 0, remaining, ceil_div(capacity - l, rate), retry, token_bucket_window(l, unit, rate)
  elseif phase == CHECK then
    level, last = token_bucket_at(key, capacity, rate, now)
    local need = cost * unit
    if need <= level then
      return true, math.floor(level / unit), 0, level, last
    end
    return false, math.max(math.floor(level / unit), 0), ceil_div(need - level, rate), level, last
  elseif phase == PEEK then
    local ok, remaining, retry
    ok, remaining, retry, level = algorithms.t(CHECK, key, cost, capacity, unit, rate, now)
    return ok and 1 or 0, remaining, ceil_div(capacity - level, rate), retry, token_bucket_window(level, unit, rate)
  elseif phase == COMMIT then
    local rest = level - cost * unit
    local reset = ceil_div(capacity - rest, rate)
    token_bucket_set(key, rest, last, reset, 0)
    return reset, token_bucket_window(rest, unit, rate)
  end
  return ceil_div(capacity - level, rate), token_bucket_window(level, unit, rate)
end
