-- sliding_window.lua: the sliding window counter. Time is cut into slots of
-- `width` us; a hash keeps one count per slot. A request passes when the
-- last `slots` slots (the current one included) plus its cost fit in the
-- quota. Those slots cover between window - width and window, so no span of
-- window - width holds more than quota, and a full window at most one slot's
-- count more. Memory: one field per slot, `slots` at most.
--
-- State    the key, a hash: field = slot number, value = count.
-- Params   a = quota, b = slot width in us, c = slots per window.
-- s1, s2, s3  the fields of slots that left the window (or nil), the
--          newest and the oldest slot still in it (or nil); for CHARGE,
--          s1 is the time admitted.
-- If Redis's clock steps back, slots newer than now stay counted until they
-- leave the window, and the times reported are capped at one window.
-- sliding_window_window is the effective window: when the oldest slot in
-- the window leaves it, or, when none is, the current slot, where units
-- spent now go.
local function sliding_window_window(oldest, width, slots, now)
  local current = math.floor(now / width)
  if not oldest or oldest > current then
    oldest = current
  end
  return math.min((oldest + slots) * width - now, slots * width)
end

algorithms.s = function(phase, key, cost, quota, width, slots, now, stale, newest, oldest)
  if phase == CHARGE then
    local slot = math.floor(stale / width) -- stale is the time admitted
    if slot <= math.floor(now / width) - slots then
      return 0
    end
    redis.call('HINCRBY', key, slot, cost)
    local ttl = ceil_div((slot + slots) * width - now, 1000)
    if redis.call('PTTL', key) < ttl then
      redis.call('PEXPIRE', key, ttl)
    end
    return 0
  elseif phase == DECIDE then
    local ok, remaining, retry, old, last, first = algorithms.s(CHECK, key, cost, quota, width, slots, now)
    if ok then
      local reset, after = algorithms.s(COMMIT, key, cost, quota, width, slots, now, old, last, first)
      return 1, remaining - cost, reset, 0, after
    end
    local reset, after = algorithms.s(SETTLE, key, cost, quota, width, slots, now, old, last, first)
    return 0, remaining, reset, retry, after
  elseif phase == CHECK then
    local first = math.floor(now / width) - slots + 1
    local fields = redis.call('HGETALL', key)
    -- slot_of and count_of list the live slots; Lua tables are kept to
    -- small integer keys, since slot numbers are in the hundreds of millions.
    local sum, slot_of, count_of = 0, {}, {}
    for i = 1, #fields, 2 do
      local slot, count = tonumber(fields[i]), tonumber(fields[i + 1])
      if not slot or not count then
        error('ratelimit: the key of a sliding-window limit does not hold its counter')
      end
      if slot >= first then
        sum = sum + count
        -- Insert in order; Redis returns small hashes in insertion order,
        -- which is nearly sorted already.
        local k = #slot_of + 1
        while k > 1 and slot_of[k - 1] > slot do
          slot_of[k], count_of[k] = slot_of[k - 1], count_of[k - 1]
          k = k - 1
        end
        slot_of[k], count_of[k] = slot, count
        if not newest or slot > newest then
          newest = slot
        end
      else
        stale = stale or {}
        stale[#stale + 1] = fields[i]
      end
    end
    if sum + cost <= quota then
      return true, quota - sum, 0, stale, newest, slot_of[1]
    end
    -- Retry when enough of the oldest slots have left the window.
    local excess, freed, slot = sum + cost - quota, 0, nil
    for k = 1, #slot_of do
      slot = slot_of[k]
      freed = freed + count_of[k]
      if freed >= excess then
        break
      end
    end
    return false, math.max(quota - sum, 0), math.min((slot + slots) * width - now, slots * width), stale, newest, slot_of[1]
  elseif phase == PEEK then
    -- SETTLE's reset, leaving the stale slots where they are.
    local ok, remaining, retry, _, last, first = algorithms.s(CHECK, key, cost, quota, width, slots, now)
    local reset = 0
    if last then
      reset = math.min((last + slots) * width - now, slots * width)
    end
    return ok and 1 or 0, remaining, reset, retry, sliding_window_window(first, width, slots, now)
  end
  if stale then
    redis.call('HDEL', key, unpack(stale))
  end
  if phase == COMMIT then
    local current = math.floor(now / width)
    redis.call('HINCRBY', key, current, cost)
    local last = math.max(newest or current, current)
    local reset = math.min((last + slots) * width - now, slots * width)
    -- The key expires when its newest slot leaves the window: only a new
    -- newest slot moves that instant.
    if not newest or newest < current then
      redis.call('PEXPIRE', key, ceil_div(reset, 1000))
    end
    return reset, sliding_window_window(oldest, width, slots, now)
  end
  if not newest then
    return 0, sliding_window_window(nil, width, slots, now)
  end
  return math.min((newest + slots) * width - now, slots * width), sliding_window_window(oldest, width, slots, now)
end
