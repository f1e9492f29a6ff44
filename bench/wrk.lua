-- wrk script of the HTTP benchmark (see loadgen.go).
-- Arguments after "--": the number of keys, the key prefix, the number
-- of threads. Each request carries X-API-Key: the prefix alone for one
-- key, else the prefix and five digits (httpKey in loadgen.go); each
-- thread walks the keys round-robin from an evenly spaced start. The
-- requests are built once per thread, in init. done() prints one line
-- that parseWrkOutput reads.

local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
end

function init(args)
  local n = tonumber(args[1])
  local prefix = args[2]
  local threads = tonumber(args[3])
  reqs = {}
  for k = 0, n - 1 do
    local key = prefix
    if n > 1 then
      key = string.format("%s%05d", prefix, k)
    end
    reqs[k] = wrk.format(nil, nil, {["X-API-Key"] = key})
  end
  count = n
  k = math.floor(id * n / threads)
end

function request()
  local r = reqs[k]
  k = k + 1
  if k == count then
    k = 0
  end
  return r
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("bench-wrk requests=%d duration_us=%d p50_us=%d p99_us=%d connect=%d read=%d write=%d timeout=%d status=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect, e.read, e.write, e.timeout, e.status))
end
