-- wrk script for a KServe v2 JSON infer request: POST a body file, validate each answer.
-- usage: wrk -s wrk_v2.lua URL -- BODY_FILE EXPECTED_SUBSTRING
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  local f = assert(io.open(args[1], "rb"))
  wrk.body = f:read("*a")
  f:close()
  expected = args[2] or '"OUTPUT0"'
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  bad = 0
end

function response(status, headers, body)
  if status ~= 200 or not string.find(body, expected, 1, true) then
    bad = bad + 1
  end
end

function done(summary, latency, requests)
  local invalid = 0
  for _, t in ipairs(threads) do
    invalid = invalid + t:get("bad")
  end
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"errors":%d,"invalid":%d,' ..
    '"p50":%d,"p90":%d,"p99":%d,"avg":%.1f}\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.status + e.timeout,
    invalid, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.mean))
end
