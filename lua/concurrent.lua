-- concurrent.lua: the requests in flight, each holding a slot
-- that expires unless its holder renews it (see renew.lua), so that the
-- slots of an instance that crashed come back. A request passes while
-- fewer than quota slots are live, and takes one slot whatever its cost;
-- end.lua gives it back.
--
-- State    the key, a sorted set: member = the slot's id, score = when
--          it expires, in us. The key expires with its last slot.
-- Params   a = quota, b = the slot's life in us, c = the request's
--          slot id (0 when it takes none: Peek, and a request denied).
-- s1       the number of live slots.
-- A slot frees up when a request ends, which nothing can foresee: a denial
-- says to retry in a second, or when the soonest slot expires if that is
-- sooner. The effective window is 0: no slot is promised for any time.

-- concurrent_times returns, for the slots live at now, how many there
-- are, when the soonest and the latest expire (0 when none is).
local function concurrent_times(key, now)
  local live = redis.call('ZCOUNT', key, '(' .. int(now), '+inf')
  if live == 0 then
    return 0, 0, 0
  end
  local first = redis.call('ZRANGEBYSCORE', key, '(' .. int(now), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  return live, tonumber(first[2]), tonumber(last[2])
end

-- concurrent_retry is when a denied request may try again.
local function concurrent_retry(soonest, now)
  return math.max(math.min(1000000, soonest - now), 1)
end

algorithms.k = function(phase, key, cost, quota, slot, id, now, live)
  if phase == CHARGE then
    return 0 -- a slot is not replayed: its request is over
  elseif phase == DECIDE then
    local ok, remaining, retry
    ok, remaining, retry, live = algorithms.k(CHECK, key, cost, quota, slot, id, now)
    if ok then
      local reset = algorithms.k(COMMIT, key, cost, quota, slot, id, now, live)
      return 1, remaining - 1, reset, 0, 0
    end
    local _, _, last = concurrent_times(key, now)
    return 0, remaining, last - now, retry, 0
  elseif phase == CHECK then
    local soonest
    live, soonest = concurrent_times(key, now)
    if live < quota then
      return true, quota - live, 0, live
    end
    return false, 0, concurrent_retry(soonest, now), live
  elseif phase == PEEK then
    local n, soonest, last = concurrent_times(key, now)
    local reset = 0
    if n > 0 then
      reset = last - now
    end
    if n < quota then
      return 1, quota - n, reset, 0, 0
    end
    return 0, 0, reset, concurrent_retry(soonest, now), 0
  elseif phase == COMMIT then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    redis.call('ZADD', key, now + slot, int(id))
    redis.call('PEXPIRE', key, ceil_div(slot, 1000))
    local _, _, last = concurrent_times(key, now)
    return last - now, 0
  end
  local n, _, last = concurrent_times(key, now)
  if n == 0 then
    return 0, 0
  end
  return last - now, 0
end
