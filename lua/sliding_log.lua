-- sliding_log.lua: a sorted set of the admitted requests' times, trimmed to
-- the last window on every call. A request passes when the entries in
-- (now - window, now] plus its cost fit in the quota, so no span of one
-- window ever holds more than quota. A cost of n adds n distinct members.
-- Memory grows with the quota: one entry per admitted unit.
--
-- State    the key, a sorted set: score = time in us, member = the time, or
--          "time:seq" when one microsecond holds several entries.
-- Params   a = quota, b = window in us, c = window in ms.
-- s1       the number of entries in the window; for CHARGE, the time
--          admitted.
-- If Redis's clock steps back, entries stamped later than now stay counted
-- until they leave the window, and the times reported are capped at one
-- window.
local charged = 0 -- entries CHARGE added in this script run

-- sliding_log_window returns the effective window of a log that holds
-- entries in the window (count of them): when its oldest, the first
-- entry after `after` (the rank 0 once trimmed), leaves; or a whole window
-- when it holds none.
local function sliding_log_window(key, count, window, now, after)
  if count == 0 then
    return window
  end
  local oldest
  if after then
    oldest = redis.call('ZRANGEBYSCORE', key, after, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  else
    oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  end
  return math.min(tonumber(oldest[2]) + window - now, window)
end

algorithms.l = function(phase, key, cost, quota, window, window_ms, now, count)
  if phase == CHARGE then
    local at = count
    if at <= now - window then
      return 0
    end
    -- Entries at the time admitted; "time:c" members, numbered within the
    -- run and stamped with its time, never meet those of COMMIT. More
    -- than quota would only lengthen the denial nothing else can.
    local prefix = int(at) .. ':c' .. int(now) .. ':'
    local left = math.min(cost, quota)
    while left > 0 do
      local args = {}
      for k = 1, math.min(left, 1000) do
        charged = charged + 1
        args[2 * k - 1] = at
        args[2 * k] = prefix .. charged
      end
      redis.call('ZADD', key, unpack(args))
      left = left - #args / 2
    end
    redis.call('PEXPIRE', key, window_ms)
    return 0
  elseif phase == DECIDE then
    -- Alone, the request can trim first: then the entries left are the
    -- window, counted in O(1) and found by rank.
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
    count = redis.call('ZCARD', key)
    if count + cost <= quota then
      local after = sliding_log_window(key, count, window, now)
      return 1, quota - count - cost, algorithms.l(COMMIT, key, cost, quota, window, window_ms, now), 0, after
    end
    local rank = count + cost - quota - 1
    local freeing = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
    local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    local after = math.min(tonumber(freeing[2]) + window - now, window)
    if rank > 0 then
      after = sliding_log_window(key, count, window, now)
    end
    return 0, math.max(quota - count, 0), math.min(tonumber(newest[2]) + window - now, window),
      math.min(tonumber(freeing[2]) + window - now, window), after
  elseif phase == CHECK then
    local after = '(' .. int(now - window)
    count = redis.call('ZCOUNT', key, after, '+inf')
    if count + cost <= quota then
      return true, quota - count, 0, count
    end
    -- The entry whose expiry makes room for cost says when to retry.
    local freeing = redis.call('ZRANGEBYSCORE', key, after, '+inf', 'WITHSCORES', 'LIMIT', count + cost - quota - 1, 1)
    return false, math.max(quota - count, 0), math.min(tonumber(freeing[2]) + window - now, window), count
  elseif phase == PEEK then
    -- SETTLE's reset, without trimming: when any entry is in the window,
    -- the newest is.
    local ok, remaining, retry
    ok, remaining, retry, count = algorithms.l(CHECK, key, cost, quota, window, window_ms, now)
    local reset = 0
    if count > 0 then
      local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
      reset = math.min(tonumber(newest[2]) + window - now, window)
    end
    return ok and 1 or 0, remaining, reset, retry, sliding_log_window(key, count, window, now, '(' .. int(now - window))
  end
  if phase ~= COMMIT or count then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window) -- DECIDE trimmed already
  end
  if phase == COMMIT then
    -- Members must be distinct. The time alone names the usual single
    -- entry; a request in the same microsecond as an earlier one, or a cost
    -- above 1, adds "time:seq" members until ZADD reports cost new ones.
    local stamp, added, seq = int(now), 0, 0
    if cost == 1 then
      added = redis.call('ZADD', key, now, stamp)
    end
    while added < cost do
      local args = {}
      for k = 1, math.min(cost - added, 1000) do
        args[2 * k - 1] = now
        args[2 * k] = stamp .. ':' .. seq
        seq = seq + 1
      end
      added = added + redis.call('ZADD', key, unpack(args))
    end
    redis.call('PEXPIRE', key, window_ms)
    if count then -- from CHECK, which counted the entries before these
      return window, sliding_log_window(key, count, window, now)
    end
    return window
  end
  if count == 0 then
    return 0, window
  end
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  return math.min(tonumber(newest[2]) + window - now, window), sliding_log_window(key, count, window, now)
end
