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
-- A request that held its cost in the limits charged from usage (see
-- decide.lua's holds_read) settles there: its hold is given back and its
-- usage taken, once. Its id goes into the key's ended set until
-- hold_life from now, so that the same end sent again (a resend after a
-- lost answer) takes nothing; an end whose hold lapsed takes its usage.
-- The set keeps the newest max_holds ids: a resend that comes after as
-- many other ends of the key takes its usage again.
--
-- KEYS     the request's keys, one per limit, then the holds key of each
--          limit charged from usage, then, when there is one, the key's
--          ended set (member = the id of a request settled, score = when
--          the member goes); they share one {hash tag}.
-- ARGV     the usage, a deadline (in Redis's microseconds; 0: none), then
--          for each limit its algorithm code and parameters a, b, c; the
--          codes of the limits charged from usage carry the request's
--          "#id" when it held. Read only through end_args and limit_args.
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
  local reply, h, ended = {}, n, KEYS[#KEYS]
  local settled = false -- the request's holds were settled by an earlier end
  local id = nil
  for i = 1, n do
    id = id or hold_id(limit_code(first, i))
  end
  if id then
    local now = clock()
    redis.call('ZREMRANGEBYSCORE', ended, '-inf', now) -- marks that lapsed: a hold that lapsed since is charged
    settled = redis.call('ZSCORE', ended, id) ~= false
    if not settled then -- a mark lasts from the first end, however many come
      redis.call('ZADD', ended, now + hold_life, id)
      redis.call('ZREMRANGEBYRANK', ended, 0, -max_holds - 1) -- the newest only
      redis.call('PEXPIRE', ended, hold_life / 1000 + 1)
    end
  end
  for i = 1, n do
    local code, pa, pb, pc = limit_args(first, i)
    if code == 'k' and pc ~= 0 then
      redis.call('ZREM', KEYS[i], int(pc)) -- the request's slot, given back (see COMMIT)
    end
    local take = used > 0 and usage(code)
    if usage(code) then
      h = h + 1
      if id and redis.call('HDEL', KEYS[h], id) == 0 and settled then
        take = false -- settled already: its usage was taken then
      end
    end
    if take then
      -- Taken now, as admitted now: CHARGE, whatever is left. A sliding
      -- log (a count-only Limiter's, whose charges are at most a cost)
      -- takes them as a decision does, in members no other run can name.
      local now, at = clock(), nil
      local phase = COMMIT
      if kind(code) ~= 'L' then
        phase, at = CHARGE, now
      end
      algorithm(code)(phase, KEYS[i], used, pa, pb, pc, now, at)
    end
  end
  peek_limits(reply, n, first, 1)
  return table.concat(reply, ' ')
end
