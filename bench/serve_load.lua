-- The request bench/serve_load.sh has wrk send, and the check of every answer: one
-- `resources/read` of the 2026-07-28 revision (stateless: the era, the client's name and
-- capabilities in `_meta`, the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name`
-- headers, the bearer token), the same bytes to either server.
--
--     wrk ... --script bench/serve_load.lua URL -- URI TEXT TOKEN
--
-- An answer counts as good when its status is 200 and its body (JSON, or an event stream
-- of one message) holds the request's id and TEXT, the resource's text. At the end one
-- line, `serve_load: {...}`, gives the run as JSON for the script to read: requests,
-- duration, requests/s, p50 and p99 latency in microseconds, good and bad answers, the
-- first bad one, and wrk's socket errors.

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  local uri, text, token = args[1], args[2], args[3]
  expected = text
  good = 0
  bad = 0
  first_bad = ""
  wrk.method = "POST"
  wrk.body = '{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"' .. uri
    .. '","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
    .. '"io.modelcontextprotocol/clientInfo":{"name":"wrk","version":"1"},'
    .. '"io.modelcontextprotocol/clientCapabilities":{}}}}'
  wrk.headers["Authorization"] = "Bearer " .. token
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json, text/event-stream"
  wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
  wrk.headers["Mcp-Method"] = "resources/read"
  wrk.headers["Mcp-Name"] = uri
end

function response(status, headers, body)
  if status == 200 and body and body:find('"id":1', 1, true) and body:find(expected, 1, true) then
    good = good + 1
  else
    bad = bad + 1
    if first_bad == "" then
      first_bad = status .. " " .. string.sub(body or "", 1, 300)
    end
  end
end

-- A JSON string of `s`: quotes, backslashes and control characters escaped.
local function quoted(s)
  return '"' .. s:gsub('[%c"\\]', function(c) return string.format("\\u%04x", c:byte()) end) .. '"'
end

function done(summary, latency, requests)
  local good_all, bad_all, first = 0, 0, ""
  for _, thread in ipairs(threads) do
    good_all = good_all + thread:get("good")
    bad_all = bad_all + thread:get("bad")
    if first == "" then
      first = thread:get("first_bad")
    end
  end
  local e = summary.errors
  io.write(string.format(
    'serve_load: {"requests": %d, "duration_us": %d, "requests_per_s": %.1f, '
      .. '"p50_us": %d, "p99_us": %d, "good": %d, "bad": %d, "first_bad": %s, '
      .. '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}}\n',
    summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(99), good_all, bad_all, quoted(first),
    e.connect, e.read, e.write, e.status, e.timeout))
end
