-- end.lua: ends a request that decide.lua admitted, once its response is
-- done: it gives back the request's slot of a Concurrent limit (the
-- slot whose id is that limit's parameter c), and its usage is taken
-- from each of its limits charged from usage
-- (their codes are in upper case, see decide.lua), whatever they have
-- left. A limit used past its quota is in debt, and denies until time
-- pays the debt back: a fixed window or a calendar period until it ends, a
-- sliding window until the slots leave it, a token bucket until it refills.
-- The other limits are not touched. The store runs decide.lua, the
-- algorithm files, then this file.
--
-- KEYS     the request's keys, one per limit; they share one {hash tag}.
-- ARGV     the usage, a deadline (in Redis's microseconds; 0: none), then
--          for each limit its algorithm code and parameters a, b, c. Read
--          only through end_args and limit_args.
-- Reply    one line, as peek.lua's for a request of 1 without a ban: five
--          integers per limit (allowed 1 or 0, remaining, reset_after,
--          retry_after, window), separated by spaces; or "X" when the
--          call reached Redis after its deadline and charged nothing: its
--          caller charged it elsewhere.

-- end_args returns the usage, the deadline, the number of limits and
-- where their entries start, for limit_args.
local function end_args()
  return tonumber(ARGV[1]), tonumber(ARGV[2]), (#ARGV - 2) / 4, 3
end

local function end_request()
  local used, deadline, n, first = end_args()
  if deadline > 0 and clock() > deadline then
    return 'X'
  end
  -- A calendar whose periods do not hold Redis's time fails before any
  -- write, so that the store may ask again.
  for i = 1, n do
    local code, _, pb, pc = limit_args(first, i)
    if string.lower(kind(code)) == 'c' then
      calendar_period(pb, pc, clock())
    end
  end
  local reply = {}
  for i = 1, n do
    local code, pa, pb, pc = limit_args(first, i)
    if code == 'k' and pc ~= 0 then
      redis.call('ZREM', KEYS[i], int(pc)) -- the request's slot, given back (see COMMIT)
    end
    if used > 0 and usage(code) then
      -- Taken now, as admitted now: CHARGE, whatever is left. A sliding
      -- log (a count-only Limiter's, whose charges are at most a cost)
      -- takes them as a decision does, in members no other run can name.
      local now, at = clock(), nil
      local phase = COMMIT
      if code ~= 'L' then
        phase, at = CHARGE, now
      end
      algorithm(code)(phase, KEYS[i], used, pa, pb, pc, now, at)
    end
  end
  peek_limits(reply, n, first, 1)
  return table.concat(reply, ' ')
end
