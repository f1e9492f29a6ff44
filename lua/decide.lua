-- decide.lua: decides requests against their limits, each all or nothing.
--
-- The store runs this file, then the algorithm files the requests need,
-- then "return decide()". Each algorithm file registers one function in
-- `algorithms` under a one-letter code, called as
--   f(phase, key, cost, a, b, c, now, s1, s2, s3)
-- where a, b, c are the limit's integer parameters and now is Redis's TIME
-- in microseconds (0 for the fixed window, which never needs it; see
-- `clockless`). Durations are in microseconds. The phases:
--   CHECK   reads the state and writes nothing. Returns allowed, remaining
--           (before taking cost), retry_after (0 when allowed), and s1, s2,
--           s3: what COMMIT and SETTLE need.
--   COMMIT  takes cost and returns reset_after and window. Runs only when
--           every limit of the request allowed.
--   SETTLE  runs instead of COMMIT after a denial: takes nothing, may tidy
--           expired state, and returns reset_after and window.
--   DECIDE  a request with this one limit: CHECK then COMMIT or SETTLE, in
--           as few calls as the algorithm can. Returns allowed (1 or 0),
--           remaining (after the decision), reset_after, retry_after,
--           window.
--   CHARGE  takes cost, admitted elsewhere at time s1 (<= now), whatever
--           the room, as if the request had been decided here then; a
--           time too old to count changes nothing. See charge.lua.
--   PEEK    answers what CHECK then SETTLE would, and writes nothing: not
--           even the tidying SETTLE may do, whose expired state it ignores
--           instead. Returns allowed (1 or 0), remaining (before taking
--           cost: what the key may spend now), reset_after, retry_after,
--           window. See peek.lua.
-- window is the effective window (ratelimit.Result.Window): the time
-- until a unit beyond the remaining ones comes back, were they all spent
-- now; never later than the truth.
-- A CHECK that raises an error (WRONGTYPE, a foreign value) ends its
-- request before any write, so none of its keys is touched.
--
-- A request may have a ban (see ratelimit.Ban), whose state is a hash in
-- its ban key: s = strikes, w = time of the first strike counted, u = end
-- of the last ban (0: none), l = that ban's level (1 for the first of a
-- series). The ban key is read first, and a foreign value there ends the
-- request before any write too. While now < u the request is denied and
-- its limits are not even read. Otherwise its limits decide; a denial is
-- a strike, which may start a ban (see ban_strike); an allowed request
-- changes nothing. A request without a ban never reads a ban key.
--
-- One run may decide several requests, which the store batches when they
-- arrive together; they share one reading of TIME.
-- ARGV     for each request: n (its number of limits, negated when the
--          request has a ban), cost, deadline (in Redis's microseconds; 0:
--          none), then for each limit its algorithm code and parameters a,
--          b, c, then, when the request has a ban, the ban's after,
--          within, for and max (durations in microseconds). Read only
--          through request_args, limit_args, limit_code and ban_args.
-- KEYS     for each request, in order, its keys, one per limit, then the
--          holds key of each limit charged from usage (see holds_read),
--          then its ban key when it has a ban; the keys of a request share
--          one {hash tag}.
-- Reply    one line per request, joined by newlines: five integers per
--          limit (allowed 1 or 0, remaining, reset_after, retry_after,
--          window; a leased limit asking for a slice adds two, the
--          units it took for the instance beyond the cost and how long
--          they last, see slice),
--          then, when the request has a ban, banned (the time until the
--          ban ends; 0: not banned), separated by spaces; or "E " and an
--          error with its newlines turned into spaces, or "X" for a
--          request that reached Redis after its deadline and was not
--          decided. The request passed iff every allowed is 1. A banned
--          request, and one whose denial starts a ban, has every allowed
--          0, every remaining 0, reset_after and retry_after at least
--          banned, and window banned. (A string costs Redis far less to return than an
--          array.)

local algorithms, clockless = {}, {f = true, F = true}
local CHECK, COMMIT, SETTLE, DECIDE, CHARGE, PEEK = 1, 2, 3, 4, 5, 6

-- A limit charged from usage (ratelimit.Limit.Usage) comes with its
-- algorithm's code in upper case: a request passes it while its cost
-- fits, as any other, but takes nothing from it; the usage is charged
-- once the response is done (see end.lua). Its algorithm is the same.
-- A limit that takes the same units from every request, whatever its
-- cost (ratelimit.Limit.Cost), has them after its code: "s1".
local function algorithm(code)
  return algorithms[string.lower(string.sub(code, 1, 1))]
end

-- kind returns code's algorithm letter, without the units after it.
local function kind(code)
  return string.sub(code, 1, 1)
end

-- cost_of returns what a request of cost takes from the limit of code.
local function cost_of(code, cost)
  if #code == 1 then
    return cost
  end
  local units = string.match(code, '^%a(%d+)')
  return units and tonumber(units) or cost
end

-- A leased limit (ratelimit.Limit.Leased) whose request asks for a slice
-- has "~want~life" after its code: besides its cost, it takes up to want
-- more units for the instance to spend in process, for at most life
-- microseconds (see slice).
local function leased(code)
  return #code > 1 and string.find(code, '~', 2, true) ~= nil
end

-- usage reports whether code is that of a limit charged from usage.
local function usage(code)
  return string.byte(code) < 97
end

-- The readers of ARGV (see the header): nothing else reads it by place.
-- A request's entries start at ARGV[a]; its limits', at ARGV[first].

-- holds_keys returns how many of the n limits whose entries start at
-- ARGV[first] are charged from usage: each has a holds key.
local function holds_keys(first, n)
  local u = 0
  for i = 1, n do
    if usage(ARGV[first + 4 * i - 4]) then
      u = u + 1
    end
  end
  return u
end

-- request_args returns the n, cost and deadline of the request whose
-- entries start at ARGV[a], where its limits' entries start, and its
-- numbers of KEYS and of ARGV entries.
local function request_args(a)
  local n = tonumber(ARGV[a])
  local keys, args = n, 3 + 4 * n
  if n < 0 then
    keys, args = 1 - n, 7 - 4 * n
  end
  keys = keys + holds_keys(a + 3, math.abs(n))
  return n, tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), a + 3, keys, args
end

-- limit_code returns the code of limit i of the limits whose entries
-- start at ARGV[first]; limit_args its code and parameters a, b, c. Each
-- limit has four entries, here and in the ARGV of peek.lua, end.lua and
-- charge.lua.
local function limit_code(first, i)
  return ARGV[first + 4 * i - 4]
end

local function limit_args(first, i)
  local j = first + 4 * i - 4
  return ARGV[j], tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3])
end

-- ban_args returns the after, within, for and max of the ban that follows
-- the n limits whose entries start at ARGV[first].
local function ban_args(first, n)
  local j = first + 4 * n
  return tonumber(ARGV[j]), tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3])
end

-- int formats an integral number exactly for concatenation; tostring would
-- write 1.7e+15. (redis.call arguments need no help: Redis writes numbers
-- with 17 digits.)
local function int(x)
  return string.format('%d', x)
end

-- int_pair returns the two integers of v, a key's value that holds two
-- integers separated by a space, as the token bucket and the calendar
-- quotas keep theirs; a value that does not raises err, before any write.
local function int_pair(v, err)
  local sp = string.find(v, ' ', 1, true)
  local a = sp and tonumber(string.sub(v, 1, sp - 1))
  local b = sp and tonumber(string.sub(v, sp + 1))
  if not a or not b then
    error(err)
  end
  return a, b
end

-- ceil_div returns ceil(a / b) for 0 <= a <= 2^53 and b >= 1, exactly.
local function ceil_div(a, b)
  local q = math.floor(a / b)
  if q * b < a then
    q = q + 1
  end
  return q
end

-- A limit charged from usage holds each admitted request's cost from
-- admission until the request ends (see end.lua), so that requests in
-- flight together cannot overrun it: a request passes while its cost and
-- the units held fit. The holds are a hash in the limit's holds key: field
-- = the request's id, value = "units expires", expires in Redis's us. A
-- hold lapses at expires unless the instance running its request renews
-- it (see renew.lua), so the holds of an instance that stopped come back
-- after hold_life. A request that holds has "#id" after its usage
-- limits' codes. A holds key keeps at most max_holds holds: a request
-- past them is denied as if the limit were full.
local hold_life, max_holds = 30000000, 4096 -- us, spec.HoldLife; memory's maxHolds

-- hold_id returns the id after code's "#", or nil.
local function hold_id(code)
  return string.match(code, '#(%d+)$')
end

-- holds_read returns what the holds key `key` holds at now: the units of
-- its live holds, the soonest end of one (0: none), their number, and the
-- fields of those that lapsed. A foreign value raises an error, before
-- any write.
local function holds_read(key, now)
  local v = redis.call('HGETALL', key)
  local held, soonest, live, lapsed = 0, 0, 0, {}
  for j = 1, #v, 2 do
    local units, expires = int_pair(v[j + 1], 'ratelimit: a holds key does not hold reservations')
    if expires > now then
      held, live = held + units, live + 1
      if soonest == 0 or expires < soonest then
        soonest = expires
      end
    else
      lapsed[#lapsed + 1] = v[j]
    end
  end
  return held, soonest, live, lapsed
end

-- holds_write holds units for id in the holds key `key` at now (none when
-- units is 0), and forgets the lapsed fields.
local function holds_write(key, id, units, now, lapsed)
  if #lapsed > 0 then
    redis.call('HDEL', key, unpack(lapsed))
  end
  if units > 0 then
    redis.call('HSET', key, id, int(units) .. ' ' .. int(now + hold_life))
    redis.call('PEXPIRE', key, hold_life / 1000 + 1)
  end
end

-- holds_check is f's phase (CHECK or PEEK) for a request of cost under
-- the limit of key, f's algorithm, with parameters pa, pb, pc and
-- capacity, whose holds keep held units, the soonest ending at soonest,
-- live of them: the cost fits if it does with what is held, and the
-- units remaining are those left past what is held. It returns allowed
-- (a boolean), remaining and retry_after so adjusted, then f's own answer
-- past remaining: retry_after, s1, s2, s3 (CHECK), or reset_after,
-- retry_after, window (PEEK). A denial that holds had a part
-- in is told to retry when the soonest hold lapses, in a second at most,
-- or sooner when the algorithm says the whole fits then; never before the
-- cost alone would fit. (A check of what can never fit is not made: a
-- log's would read past its entries.)
local function holds_check(phase, f, key, cost, held, soonest, live, capacity, pa, pb, pc, now)
  local ok, remaining, x1, x2, x3, x4 = f(phase, key, cost, pa, pb, pc, now)
  local alone, retry_alone = ok, x1
  if phase == PEEK then
    alone, retry_alone = ok == 1, x2
  end
  if held == 0 then
    return alone, remaining, retry_alone, x1, x2, x3, x4
  end
  local full, whole, r = live >= max_holds and cost > 0, cost + held <= capacity, 1000000
  if whole then
    local ok_whole, _, y1, y2 = f(phase, key, cost + held, pa, pb, pc, now)
    local retry_whole = y1
    if phase == PEEK then
      ok_whole, retry_whole = ok_whole == 1, y2
    end
    if ok_whole and not full then
      return true, remaining - held, 0, x1, x2, x3, x4
    end
    if not full then
      r = math.min(r, retry_whole)
    end
  end
  r = math.min(r, soonest - now)
  if not alone then
    r = math.max(r, retry_alone)
  end
  remaining = math.max(remaining - held, 0)
  if full then
    remaining = 0
  end
  return false, remaining, math.max(r, 1), x1, x2, x3, x4
end

-- capacity_of is the most units the limit of code and parameters pa, pb
-- holds: a token bucket's burst, else the quota.
local function capacity_of(code, pa, pb)
  if string.lower(kind(code)) == 't' then
    return math.floor(pa / pb)
  end
  return pa
end

local now_us = 0
local function clock()
  if now_us == 0 then
    local t = redis.call('TIME')
    now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return now_us
end

-- slice_margin is how long before the earliest end Redis may give a
-- window or a slot a slice of it ends (us): the slice's life is counted
-- on the instance from before the request was sent, which covers the
-- network; the margin covers the clocks' rates and rounding.
local slice_margin = 1000

-- slice returns the units a request that passed may take beyond its cost
-- from the leased limit of code, the algorithm's parameters pa, pb, pc and
-- CHECK's remaining and s1 (a fixed window's PTTL, a token bucket's
-- level) at now, how long they last, and the s1 to COMMIT with. It gives
-- what the instance wants, up to an eighth of what is left after the
-- cost, so that slices shrink as the quota runs out and its last units
-- are decided one by one, in plain decisions, and up to 1/512 of the
-- quota, so that units left unspent when a window ends stay few. A slice
-- may last only while every unit of it would count as it does now if
-- spent then: a fixed window's units until slice_margin before the
-- earliest time its key may expire (its PTTL, which rounds down), a
-- sliding window's until slice_margin before the slot they are counted
-- in ends. A token bucket's last life: the bucket keeps, for the time of
-- the slice, room for the refill of that time (rate * life), taken as if
-- the slice's units left it at the slice's end, so that no span of time
-- admits more than the bucket would, whenever within its life the units
-- are spent.
local function slice(code, cost, remaining, pa, pb, pc, now, s1)
  local want, life = string.match(code, '~(%d+)~(%d+)$')
  want, life = tonumber(want), tonumber(life)
  local k, quota = kind(code), pa
  if k == 't' then
    quota = math.floor(pa / pb)
    local level = math.min(s1, pa - pc * life)
    if level < cost * pb then
      return 0, 0, s1
    end
    remaining, s1 = math.floor(level / pb), level
  elseif k == 's' then
    life = math.min(life, (math.floor(now / pb) + 1) * pb - now - slice_margin)
  else
    local left = pb * 1000 -- a new window
    if s1 >= 0 then
      left = math.min(s1, pb) * 1000
    end
    life = math.min(life, left - slice_margin)
  end
  local extra = math.min(want, math.floor((remaining - cost) / 8), math.max(1, math.floor(quota / 512)))
  if extra < 1 or life <= 0 then
    return 0, 0, s1
  end
  return extra, life, s1
end

-- slice_set fills extra, life, s1 and remaining for the n limits of a
-- request that passed, whose entries start at ARGV[first]: all or none.
-- Each limit gives units for the same number of requests of this cost,
-- the fewest any of them can, for the shortest life any of them allows,
-- so that no limit's units are counted where another's are not. When
-- one can give none, none gives any, and s1 stays as CHECK left it.
local function slice_set(first, n, costs, remaining, pa, pb, pc, now, s1, extra, life)
  local requests, shortest, level = math.huge, math.huge, {}
  for i = 1, n do
    local units, l
    units, l, level[i] = slice(limit_code(first, i), costs[i], remaining[i], pa[i], pb[i], pc[i], now, s1[i])
    requests = math.min(requests, math.floor(units / math.max(costs[i], 1)))
    shortest = math.min(shortest, l)
  end
  if requests < 1 or shortest <= 0 then
    return
  end
  for i = 1, n do
    extra[i], life[i], s1[i] = requests * math.max(costs[i], 1), shortest, level[i]
    if kind(limit_code(first, i)) == 't' then
      remaining[i] = math.floor(s1[i] / pb[i])
    end
  end
end

-- decide_limits decides the request of cost whose n keys follow KEYS[k]
-- and whose limits' entries start at ARGV[first], at now (0: read TIME if
-- a limit needs it): it checks every limit, then takes cost from all of
-- them or from none. A limit charged from usage takes nothing: its holds
-- key, after the n keys, holds cost for the request when it passes (see
-- holds_read). It returns whether the request passed and, per limit,
-- allowed (1 or 0), remaining (after the decision), reset_after,
-- retry_after and window.
local function decide_limits(k, n, cost, first, now)
  local alg, pa, pb, pc, s1, s2, s3, ok, remaining, reset, retry, window = {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}
  local later, slot, costs = {}, {}, {} -- charged from usage: checked, not taken; a slot: one taken
  local pass, slices, extra, life = true, leased(limit_code(first, 1)), {}, {} -- a set's limits are leased all or none
  local hk, held, soonest, lapsed, h = {}, {}, {}, {}, k + n -- holds
  for i = 1, n do
    local code
    code, pa[i], pb[i], pc[i] = limit_args(first, i)
    alg[i], later[i], slot[i], costs[i] = algorithm(code), usage(code), code == 'k', cost_of(code, cost)
    extra[i], life[i], held[i] = 0, 0, 0
    if later[i] then
      h = h + 1
      hk[i] = KEYS[h]
    end
    if now == 0 and (later[i] or not clockless[kind(code)]) then
      now = clock()
    end
  end
  for i = 1, n do
    if hk[i] then
      local live, _
      held[i], soonest[i], live, lapsed[i] = holds_read(hk[i], now)
      ok[i], remaining[i], retry[i], _, s1[i], s2[i], s3[i] = holds_check(CHECK, alg[i], KEYS[k + i], costs[i], held[i], soonest[i], live,
        capacity_of(limit_code(first, i), pa[i], pb[i]), pa[i], pb[i], pc[i], now)
    else
      ok[i], remaining[i], retry[i], s1[i], s2[i], s3[i] = alg[i](CHECK, KEYS[k + i], costs[i], pa[i], pb[i], pc[i], now)
    end
    pass = pass and ok[i]
  end
  if pass and slices then
    slice_set(first, n, costs, remaining, pa, pb, pc, now, s1, extra, life)
  end
  for i = 1, n do
    if pass and not later[i] then
      local take = costs[i] + extra[i]
      reset[i], window[i] = alg[i](COMMIT, KEYS[k + i], take, pa[i], pb[i], pc[i], now, s1[i], s2[i], s3[i])
      if slot[i] then
        remaining[i] = remaining[i] - 1
      else
        remaining[i] = remaining[i] - take
      end
    else
      reset[i], window[i] = alg[i](SETTLE, KEYS[k + i], costs[i], pa[i], pb[i], pc[i], now, s1[i], s2[i], s3[i])
    end
    if hk[i] then
      local id = hold_id(limit_code(first, i))
      if pass and id then
        holds_write(hk[i], id, costs[i], now, lapsed[i])
        remaining[i] = remaining[i] - costs[i]
      elseif not ok[i] and held[i] > 0 then
        reset[i], window[i] = math.max(reset[i], retry[i]), math.min(window[i], retry[i])
      end
    end
    ok[i] = ok[i] and 1 or 0
  end
  return pass, ok, remaining, reset, retry, window, extra, life
end

-- peek_limits appends to reply each limit's PEEK for a request of cost,
-- as a line's five integers: the limits whose keys are KEYS[1] on and
-- whose entries start at ARGV[first], n of them, counting the holds of
-- those charged from usage, whose holds keys follow theirs. It tidies
-- nothing: a lapsed hold is only left out.
local function peek_limits(reply, n, first, cost)
  local h = n
  for i = 1, n do
    local code, pa, pb, pc = limit_args(first, i)
    local now, c = 0, cost_of(code, cost)
    if usage(code) or not clockless[kind(code)] then
      now = clock()
    end
    local held, soonest, live = 0, 0, 0
    if usage(code) then
      h = h + 1
      held, soonest, live = holds_read(KEYS[h], now)
    end
    local ok, remaining, retry, reset, _, window = holds_check(PEEK, algorithm(code), KEYS[i], c, held, soonest, live, capacity_of(code, pa, pb), pa, pb, pc, now)
    if not ok and held > 0 then
      reset, window = math.max(reset, retry), math.min(window, retry)
    end
    reply[#reply + 1] = string.format('%d %d %d %d %d', ok and 1 or 0, remaining, reset, retry, window)
  end
  return reply
end

-- ban_state reads a ban key: strikes, first, ends, level (see the header);
-- all 0 when the key is missing.
local function ban_state(key)
  local v = redis.call('HMGET', key, 's', 'w', 'u', 'l')
  if not (v[1] or v[2] or v[3] or v[4]) then
    return 0, 0, 0, 0
  end
  local s, w, u, l = tonumber(v[1]), tonumber(v[2]), tonumber(v[3]), tonumber(v[4])
  if not (s and w and u and l) then
    error('ratelimit: the ban key does not hold a ban')
  end
  return s, w, u, l
end

-- banned_line is the reply line of a request with n limits that is banned
-- for left more microseconds.
local function banned_line(n, left)
  left = int(left)
  return string.rep('0 0 ' .. left .. ' ' .. left .. ' ' .. left .. ' ', n) .. left
end

-- ban_strike counts a denial at now in the ban key `key` holding s, w,
-- u, l, for the ban that follows the n limits whose entries start at
-- ARGV[first], and returns the length of the ban it starts, or 0. A
-- denial within `within` of the first strike counted adds one; any other
-- starts the count afresh. `after` strikes start a ban and the count
-- again: one level up when the last ban ended less than `max` ago, else
-- at level 1; it lasts `for` (shortest) doubled once per level above 1,
-- at most `max` (longest). The key expires when nothing in it matters any
-- more: the strikes once `within` has passed since the first, the end of
-- the last ban once `max` has passed since.
local function ban_strike(key, first, n, now, s, w, u, l)
  local after, within, shortest, longest = ban_args(first, n)
  if s == 0 or now - w >= within then
    s, w = 1, now
  else
    s = s + 1
  end
  local length = 0
  if s >= after then
    if u > 0 and now - u < longest then
      l = l + 1
    else
      l = 1
    end
    length = shortest
    for _ = 2, l do
      if length >= longest then
        break
      end
      length = length * 2
    end
    length = math.min(length, longest)
    s, u = 0, now + length
  end
  redis.call('HSET', key, 's', s, 'w', w, 'u', u, 'l', l)
  local expires = 0
  if s > 0 then
    expires = w + within
  end
  if u > 0 then
    expires = math.max(expires, u + longest)
  end
  redis.call('PEXPIRE', key, ceil_div(expires - now, 1000))
  return length
end

-- decide_ban is decide_one for a request of cost with a ban and n
-- limits, whose ban key follows its limits' keys and their holds keys,
-- and whose ban follows its limits in ARGV.
local function decide_ban(k, n, cost, first)
  local now, key = clock(), KEYS[k + n + holds_keys(first, n) + 1] -- after the limits' keys and their holds keys
  local s, w, u, l = ban_state(key)
  if now < u then
    return banned_line(n, u - now)
  end
  local pass, ok, remaining, reset, retry, window
  local code, pa, pb, pc = limit_args(first, 1)
  if n == 1 and not usage(code) then
    ok, remaining, reset, retry, window = {}, {}, {}, {}, {}
    ok[1], remaining[1], reset[1], retry[1], window[1] = algorithm(code)(DECIDE, KEYS[k + 1], cost_of(code, cost), pa, pb, pc, now)
    pass = ok[1] == 1
  else
    pass, ok, remaining, reset, retry, window = decide_limits(k, n, cost, first, now)
  end
  local length = 0
  if not pass then
    length = ban_strike(key, first, n, now, s, w, u, l)
  end
  local reply = {}
  for i = 1, n do
    if length > 0 then
      reply[i] = string.format('0 0 %d %d %d', math.max(reset[i], length), math.max(retry[i], length), length)
    else
      reply[i] = string.format('%d %d %d %d %d', ok[i], remaining[i], reset[i], retry[i], window[i])
    end
  end
  return table.concat(reply, ' ') .. ' ' .. int(length)
end

-- decide_one decides the request whose keys follow KEYS[k], whose n,
-- cost and deadline are n, cost and deadline, and whose limits' entries
-- start at ARGV[first] (see request_args), and returns its reply line. A
-- request past its deadline was given up by its caller, who decided it
-- elsewhere: deciding it here too would count it twice.
local function decide_one(k, n, cost, deadline, first)
  if deadline > 0 and clock() > deadline then
    return 'X'
  end
  if n < 0 then
    return decide_ban(k, -n, cost, first)
  end
  local code, pa, pb, pc = limit_args(first, 1)
  if n == 1 and not usage(code) and not leased(code) then
    local now = 0
    if not clockless[kind(code)] then
      now = clock()
    end
    local ok, remaining, reset, retry, window = algorithm(code)(DECIDE, KEYS[k + 1], cost_of(code, cost), pa, pb, pc, now)
    return string.format('%d %d %d %d %d', ok, remaining, reset, retry, window)
  end
  local _, ok, remaining, reset, retry, window, extra, life = decide_limits(k, n, cost, first, 0)
  local reply = {}
  for i = 1, n do
    reply[i] = string.format('%d %d %d %d %d', ok[i], remaining[i], reset[i], retry[i], window[i])
    if leased(limit_code(first, i)) then
      reply[i] = reply[i] .. string.format(' %d %d', extra[i], life[i])
    end
  end
  return table.concat(reply, ' ')
end

local function decide()
  local n, cost, deadline, first, keys, args = request_args(1)
  if keys == #KEYS then
    -- One request: its error, if any, is the script's.
    return decide_one(0, n, cost, deadline, first)
  end
  local out, k, a = {}, 0, 1
  while a <= #ARGV do
    n, cost, deadline, first, keys, args = request_args(a)
    local ok, line = pcall(decide_one, k, n, cost, deadline, first)
    if not ok then
      if type(line) == 'table' then
        line = line.err
      end
      -- Newlines separate the requests' lines: none may hide in an error,
      -- whose text can hold the key.
      line = 'E ' .. (string.gsub(tostring(line), '[\r\n]', ' '))
    end
    out[#out + 1] = line
    k, a = k + keys, a + args
  end
  return table.concat(out, '\n')
end
