-- decide.lua: decides requests against their limits, each all or nothing.
--
-- The store runs this file, then the algorithm files the requests need,
-- then "return decide()". Each algorithm file registers one function in
-- `algorithms` under a one-letter code, called as
--   f(phase, key, cost, a, b, c, now, s1, s2)
-- where a, b, c are the limit's integer parameters and now is Redis's TIME
-- in microseconds (0 for the fixed window, which never needs it; see
-- `clockless`). Durations are in microseconds. The phases:
--   CHECK   reads the state and writes nothing. Returns allowed, remaining
--           (before taking cost), retry_after (0 when allowed), and s1, s2:
--           what COMMIT and SETTLE need.
--   COMMIT  takes cost and returns reset_after. Runs only when every limit
--           of the request allowed.
--   SETTLE  runs instead of COMMIT after a denial: takes nothing, may tidy
--           expired state, and returns reset_after.
--   DECIDE  a request with this one limit: CHECK then COMMIT or SETTLE, in
--           as few calls as the algorithm can. Returns allowed (1 or 0),
--           remaining (after the decision), reset_after, retry_after.
--   CHARGE  takes cost, admitted elsewhere at time s1 (<= now), whatever
--           the room, as if the request had been decided here then; a
--           time too old to count changes nothing. See charge.lua.
--   PEEK    answers what CHECK then SETTLE would, and writes nothing: not
--           even the tidying SETTLE may do, whose expired state it ignores
--           instead. Returns allowed (1 or 0), remaining (before taking
--           cost: what the key may spend now), reset_after, retry_after.
--           See peek.lua.
-- A CHECK that raises an error (WRONGTYPE, a foreign value) ends its
-- request before any write, so none of its keys is touched.
--
-- One run may decide several requests, which the store batches when they
-- arrive together; they share one reading of TIME.
-- ARGV     for each request: n (its number of limits), cost, deadline (in
--          Redis's microseconds; 0: none), then for each limit its
--          algorithm code and parameters a, b, c.
-- KEYS     for each request, in order, its n keys (one per limit); the keys
--          of a request share one {hash tag}.
-- Reply    one line per request, joined by newlines: four integers per
--          limit (allowed 1 or 0, remaining, reset_after, retry_after),
--          separated by spaces, or "E " and an error with its newlines
--          turned into spaces, or "X" for a request that reached Redis
--          after its deadline and was not decided. The request passed
--          iff every allowed is 1. (A string costs Redis far less to
--          return than an array.)

local algorithms, clockless = {}, {f = true}
local CHECK, COMMIT, SETTLE, DECIDE, CHARGE, PEEK = 1, 2, 3, 4, 5, 6

-- int formats an integral number exactly for concatenation; tostring would
-- write 1.7e+15. (redis.call arguments need no help: Redis writes numbers
-- with 17 digits.)
local function int(x)
  return string.format('%d', x)
end

-- ceil_div returns ceil(a / b) for 0 <= a <= 2^53 and b >= 1, exactly.
local function ceil_div(a, b)
  local q = math.floor(a / b)
  if q * b < a then
    q = q + 1
  end
  return q
end

local now_us = 0
local function clock()
  if now_us == 0 then
    local t = redis.call('TIME')
    now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return now_us
end

-- decide_one decides the request whose keys follow KEYS[k] and whose cost
-- and deadline are ARGV[a] and ARGV[a + 1], and returns its reply line. A
-- request past its deadline was given up by its caller, who decided it
-- elsewhere: deciding it here too would count it twice.
local function decide_one(k, n, a)
  local cost, deadline = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  if deadline > 0 and clock() > deadline then
    return 'X'
  end
  if n == 1 then
    local code, now = ARGV[a + 2], 0
    if not clockless[code] then
      now = clock()
    end
    local ok, remaining, reset, retry = algorithms[code](DECIDE, KEYS[k + 1], cost,
      tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]), now)
    return string.format('%d %d %d %d', ok, remaining, reset, retry)
  end

  local now, alg, pa, pb, pc, s1, s2, ok, remaining, retry = 0, {}, {}, {}, {}, {}, {}, {}, {}, {}
  local pass = true
  for i = 1, n do
    local j = a + 4 * i - 2
    alg[i] = algorithms[ARGV[j]]
    pa[i], pb[i], pc[i] = tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3])
    if now == 0 and not clockless[ARGV[j]] then
      now = clock()
    end
  end
  for i = 1, n do
    ok[i], remaining[i], retry[i], s1[i], s2[i] = alg[i](CHECK, KEYS[k + i], cost, pa[i], pb[i], pc[i], now)
    pass = pass and ok[i]
  end
  local reply = {}
  for i = 1, n do
    local reset
    if pass then
      reset = alg[i](COMMIT, KEYS[k + i], cost, pa[i], pb[i], pc[i], now, s1[i], s2[i])
      remaining[i] = remaining[i] - cost
    else
      reset = alg[i](SETTLE, KEYS[k + i], cost, pa[i], pb[i], pc[i], now, s1[i], s2[i])
    end
    reply[i] = string.format('%d %d %d %d', ok[i] and 1 or 0, remaining[i], reset, retry[i])
  end
  return table.concat(reply, ' ')
end

local function decide()
  if tonumber(ARGV[1]) == #KEYS then
    -- One request: its error, if any, is the script's.
    return decide_one(0, #KEYS, 2)
  end
  local out, k, a = {}, 0, 1
  while a <= #ARGV do
    local n = tonumber(ARGV[a])
    local ok, line = pcall(decide_one, k, n, a + 1)
    if not ok then
      if type(line) == 'table' then
        line = line.err
      end
      -- Newlines separate the requests' lines: none may hide in an error,
      -- whose text can hold the key.
      line = 'E ' .. (string.gsub(tostring(line), '[\r\n]', ' '))
    end
    out[#out + 1] = line
    k, a = k + n, a + 3 + 4 * n
  end
  return table.concat(out, '\n')
end
