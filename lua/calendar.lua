-- calendar.lua: a quota per calendar day, week or month in a time zone.
-- Lua knows no time zones, so the store names the periods: two
-- consecutive ones, worked out in Go from the zone's rules, and the script
-- picks the one that holds Redis's clock. The count keeps the end of its
-- period beside it, so a count from an earlier period is never read as
-- this one's, whatever the key's expiry; the key expires when its period
-- ends. A charge may take the count past the quota (see CHARGE): the key
-- is denied until the period ends.
--
-- State    the key, a string: the end of the count's period in us and the
--          count, as two integers separated by a space, expiring at that
--          end.
-- Params   a = quota, b = the start of the second period in us, c = the
--          lengths of the first and the second period in seconds, as
--          first * 2^22 + second.
-- s1, s2   the count in this period and the period's end; for CHARGE, s1
--          is the time admitted.
-- When Redis's clock lies outside both periods, a CHECK, PEEK or DECIDE
-- raises an error starting "ratelimit: calendar:" and giving Redis's time,
-- before any write; the store works out the periods around that time and
-- asks again.

-- calendar_period returns the start and end of the period that holds now.
local function calendar_period(b, c, now)
  local second = c % 4194304
  local first = (c - second) / 4194304
  if now >= b - first * 1000000 and now < b then
    return b - first * 1000000, b
  elseif now >= b and now < b + second * 1000000 then
    return b, b + second * 1000000
  end
  error('ratelimit: calendar: the periods given do not hold Redis\'s time ' .. int(now))
end

-- calendar_count returns the count of the key in the period that ends at
-- e: 0 when the key is missing or counts an earlier period.
local function calendar_count(key, e)
  local v = redis.call('GET', key)
  if not v then
    return 0
  end
  local ends, count = int_pair(v, 'ratelimit: the key of a calendar limit does not hold its count')
  if ends < e then
    return 0
  end
  return count
end

-- calendar_reset is the time until nothing is spent: the period's end,
-- or 0 when nothing is.
local function calendar_reset(count, e, now)
  if count > 0 then
    return e - now
  end
  return 0
end

local function calendar_set(key, e, count, now)
  redis.call('SET', key, string.format('%d %d', e, count), 'PX', math.max(1, ceil_div(e - now, 1000)))
end

algorithms.c = function(phase, key, cost, quota, b, c, now, count, e)
  if phase == CHARGE then
    local at = count
    local start
    start, e = calendar_period(b, c, now)
    if at >= start then
      calendar_set(key, e, calendar_count(key, e) + cost, now)
    end
    return 0
  elseif phase == DECIDE then
    local ok, remaining, retry
    ok, remaining, retry, count, e = algorithms.c(CHECK, key, cost, quota, b, c, now)
    if ok then
      calendar_set(key, e, count + cost, now)
      return 1, remaining - cost, e - now, 0, e - now
    end
    return 0, remaining, e - now, retry, e - now
  elseif phase == CHECK then
    local _
    _, e = calendar_period(b, c, now)
    count = calendar_count(key, e)
    if count + cost <= quota then
      return true, quota - count, 0, count, e
    end
    return false, math.max(quota - count, 0), e - now, count, e
  elseif phase == PEEK then
    local ok, remaining, retry
    ok, remaining, retry, count, e = algorithms.c(CHECK, key, cost, quota, b, c, now)
    return ok and 1 or 0, remaining, calendar_reset(count, e, now), retry, e - now
  elseif phase == COMMIT then
    calendar_set(key, e, count + cost, now)
    return e - now, e - now
  end
  return calendar_reset(count, e, now), e - now
end
