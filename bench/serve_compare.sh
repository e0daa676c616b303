#!/usr/bin/env bash
# pipec serve against the official Python SDK's server, serving the same resources (a
# small fixed text, and a 1 MB file through a template), both read over stdio by the same
# Python client (bench/serve_read.py), in alternation (ABAB), then one table of the
# medians over rounds and the ratios. Goal: pipec serves at least twice the Python
# server's reads per second of the small resource.
#
#   bench/serve_compare.sh            # 5 rounds
#   ROUNDS=1 bench/serve_compare.sh   # a quick look
#
# PYTHON: a Python with the MCP SDK (default: the test venv, else python3).
# BASELINE: another pipec binary (an earlier release) to measure beside this one, over
# stdio and over streamable HTTP (`pipec serve --http` on a loopback port, with a token),
# in the same alternation: whether a change made serving slower.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds="${ROUNDS:-5}"
python="${PYTHON:-$( [ -x target/interop-venv/bin/python ] && echo target/interop-venv/bin/python || echo python3)}"
cargo build --release -q
pipec="$PWD/target/release/pipec"

site="$(mktemp -d)"
trap 'rm -rf "$site"' EXIT
mkdir -p "$site/files"
"$python" -c "import sys; open(sys.argv[1], 'w').write(('x' * 99 + '\n') * 10486)" "$site/files/large.txt"
cat > "$site/site.pipe" <<'PIPE'
serve {
  resource "file:///bench/readme" {
    name = "readme"
    mime_type = "text/plain"
    text = "A small resource of the serve benchmark."
  }
  template "file:///bench/files/{name}" {
    name = "files"
    mime_type = "text/plain"
    root = "files"
  }
}
PIPE

results="$site/results.jsonl"
baseline="${BASELINE:-}"
# One round of LABEL's `pipec serve --http`, read by the same client over HTTP.
over_http() {
  local label="$1" binary="$2" log="$site/http.log" url=""
  (cd "$site" && PIPEC_SERVE_TOKEN=bench-token XDG_CONFIG_HOME="$site/.config" \
    "$binary" serve site.pipe --http 127.0.0.1:0 2>"$log") &
  local server=$!
  for _ in $(seq 1 200); do
    url="$(sed -n 's/^pipec serve: MCP at //p' "$log" | head -1)"
    [ -n "$url" ] && break
    sleep 0.05
  done
  "$python" bench/serve_read.py "$label" --http "$url" bench-token >> "$results"
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
}
for r in $(seq 1 "$rounds"); do
  echo "round $r/$rounds" >&2
  (cd "$site" && "$python" "$OLDPWD/bench/serve_read.py" pipec "$pipec" serve site.pipe) >> "$results"
  BENCH_ROOT="$site/files" "$python" bench/serve_read.py python "$python" bench/serve_python_server.py >> "$results"
  if [ -n "$baseline" ]; then
    (cd "$site" && "$python" "$OLDPWD/bench/serve_read.py" baseline "$baseline" serve site.pipe) >> "$results"
    over_http pipec-http "$pipec"
    over_http baseline-http "$baseline"
  fi
done

"$python" - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def med(server, case, key):
    return statistics.median(r[case][key] for r in rows if r["server"] == server)
print(f"{'measurement':34} {'pipec':>10} {'Python SDK':>11} {'ratio':>7}")
for case, label in [("small", "small resource"), ("large_1mb", "1 MB file")]:
    p, q = med("pipec", case, "reads_per_s"), med("python", case, "reads_per_s")
    print(f"{label + ', reads/s':34} {p:10.1f} {q:11.1f} {p / q:6.2f}x")
    p, q = med("pipec", case, "median_ms"), med("python", case, "median_ms")
    print(f"{label + ', median ms':34} {p:10.3f} {q:11.3f} {q / p:6.2f}x")
p, q = med("pipec", "small", "reads_per_s"), med("python", "small", "reads_per_s")
print(f"goal: small reads/s >= 2x the Python server's: {'met' if p >= 2 * q else 'missed'} ({p / q:.2f}x)")
if any(r["server"] == "baseline" for r in rows):
    print()
    print(f"{'measurement':34} {'pipec':>10} {'baseline':>11} {'ratio':>7}")
    for transport, now, before, cases in [
        ("stdio", "pipec", "baseline", [("small", "small resource"), ("large_1mb", "1 MB file")]),
        ("HTTP", "pipec-http", "baseline-http", [("small", "small resource")]),
    ]:
        for case, label in cases:
            p, q = med(now, case, "reads_per_s"), med(before, case, "reads_per_s")
            print(f"{label + ', reads/s, ' + transport:34} {p:10.1f} {q:11.1f} {p / q:6.2f}x")
    p, q = med("pipec-http", "small", "reads_per_s"), med("baseline-http", "small", "reads_per_s")
    print(f"goal: small reads/s over HTTP not below the baseline's: {'met' if p >= 0.95 * q else 'missed'} ({p / q:.2f}x)")
PY
