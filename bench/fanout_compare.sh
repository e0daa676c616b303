#!/usr/bin/env bash
# A fan-out of MCP calls side by side with LangGraph: N `get_deal` calls to
# pipec-demo-crm over stdio, at most 8 at a time.
#
#   pipec      `pipec run` of bench/fanout.pipe (an `each` over a read-only `call`) on a
#              fresh redb file: the whole process, timed from outside;
#   floor      the same calls made by pipec's MCP client alone, no runtime and no store
#              (benches/fanout.rs): what any client pays for them;
#   langgraph  ../shared/peers/fanout_peer.py: LangGraph `Send` fan-out with one shared
#              MCP ClientSession and AsyncSqliteSaver, timed after its imports.
#
# The three alternate, round after round, for each N. Then, once each and untimed: the
# fdatasyncs of pipec's run (perf, or strace), its peak RSS at 1,000, 5,000 and 20,000 calls, and
# the store's bytes per item. Prints Markdown tables of medians and ratios.
#
#   bench/fanout_compare.sh              # 5 rounds of 1,000 and 5,000 calls
#   bench/fanout_compare.sh --quick      # 1 round of 1,000 (a smoke run)
#
# Environment:
#   PEER_DIR   the peer harness (default: ../shared/peers next to this checkout)
#   PEER_VENV  its virtualenv with LangGraph and the MCP SDK (default:
#              ~/.cache/pipec-peers-venv; the harness's run.sh makes it)
#   ROUNDS     rounds of alternation (default 5, or 1 with --quick)
#   OUT        where the JSON of every measurement goes (default target/fanout_compare.json)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
peer="${PEER_DIR:-$here/../shared/peers}"
venv="${PEER_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/pipec-peers-venv}"
quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "error: unknown argument \`$1\`" >&2
     echo "  help: bench/fanout_compare.sh [--quick]" >&2
     exit 2 ;;
esac
rounds="${ROUNDS:-$([ "$quick" = 1 ] && echo 1 || echo 5)}"
sizes="$([ "$quick" = 1 ] && echo 1000 || echo "1000 5000")"
out="${OUT:-$here/target/fanout_compare.json}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [ ! -f "$peer/fanout_peer.py" ]; then
  echo "error: no peer harness at $peer" >&2
  echo "  help: set PEER_DIR to the folder holding fanout_peer.py" >&2
  exit 2
fi
if [ ! -x "$venv/bin/python" ]; then
  echo "error: no peer venv at $venv" >&2
  echo "  help: run $peer/run.sh --quick --only a once (it makes the venv), or set PEER_VENV" >&2
  exit 2
fi
for tool in strace /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "error: $tool is needed (apt-get install strace time; linux-perf is used when it may count syscalls)" >&2; exit 2; }
done

cd "$here"
echo "building pipec, pipec-demo-crm and the floor benchmark (release)" >&2
cargo build -q --release --bin pipec --bin pipec-demo-crm
cargo bench --bench fanout --no-run >/dev/null 2>&1 || cargo bench --bench fanout --no-run
pipec="$here/target/release/pipec"
export PIPEC_DEMO_CRM="$here/target/release/pipec-demo-crm"

inputs() { python3 -c "import json,sys; json.dump({'ids': ['D%d' % i for i in range($1)]}, sys.stdout)" > "$work/in$1.json"; }
for n in $sizes 20000; do inputs "$n"; done

# One measured run of pipec: whole process, fresh store. Prints {"n","wall_ms","rss_kb"}.
run_pipec() {
  local n="$1" store="$work/run.redb"
  rm -f "$store"
  /usr/bin/time -f "%e %M" -o "$work/time" "$pipec" run bench/fanout.pipe \
    --inputs "$work/in$n.json" --store "$store" --quiet > "$work/out.json"
  python3 - "$n" "$work/time" "$work/out.json" <<'EOF'
import json, sys
n = int(sys.argv[1]); wall, rss = open(sys.argv[2]).read().split()[-2:]
deals = json.load(open(sys.argv[3]))["deals"]
assert len(deals) == n and deals[-1]["deal_id"] == "D%d" % (n - 1), "pipec's run lost deals"
print(json.dumps({"n": n, "wall_ms": round(float(wall) * 1000, 1), "rss_kb": int(rss)}))
EOF
}

: > "$work/rows.jsonl"
for r in $(seq 1 "$rounds"); do
  for n in $sizes; do
    echo "round $r/$rounds, $n calls: pipec, floor, langgraph" >&2
    run_pipec "$n" | sed 's/^{/{"side":"pipec",/' >> "$work/rows.jsonl"
    cargo bench -q --bench fanout -- "$n" 2>/dev/null | tail -1 | sed 's/^{/{"side":"floor",/' >> "$work/rows.jsonl"
    "$venv/bin/python" "$peer/fanout_peer.py" "$PIPEC_DEMO_CRM" "$n" | tail -1 | sed 's/^{/{"side":"langgraph",/' >> "$work/rows.jsonl"
  done
done

echo "untimed: fdatasyncs, memory and store bytes" >&2
rm -f "$work/sync.redb"
# perf counts the syscalls at their tracepoints without slowing the run (strace stretches
# it, and with it the time windows of group commit); strace where perf may not.
if perf stat -e syscalls:sys_enter_fdatasync true >/dev/null 2>&1; then
  perf stat -x, -o "$work/perf" -e syscalls:sys_enter_fdatasync -e syscalls:sys_enter_fsync \
    "$pipec" run bench/fanout.pipe --inputs "$work/in1000.json" --store "$work/sync.redb" --quiet > /dev/null
  syncs="$(awk -F, '/sys_enter_f/ { s += $1 } END { print s + 0 }' "$work/perf")"
else
  strace -f -qq -c -e trace=fdatasync,fsync -o "$work/strace" "$pipec" run bench/fanout.pipe \
    --inputs "$work/in1000.json" --store "$work/sync.redb" --quiet > /dev/null
  syncs="$(awk '$NF == "fdatasync" || $NF == "fsync" { s += $4 } END { print s + 0 }' "$work/strace")"
fi
bytes="$(stat -c %s "$work/sync.redb")"
: > "$work/rss.jsonl"
for n in 1000 5000 20000; do run_pipec "$n" >> "$work/rss.jsonl"; done

python3 - "$work/rows.jsonl" "$work/rss.jsonl" "$syncs" "$bytes" "$out" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rss = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
syncs, store_bytes, out = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
med = lambda side, n: statistics.median(r["wall_ms"] for r in rows if r["side"] == side and r["n"] == n)
sizes = sorted({r["n"] for r in rows})
print("| calls | pipec (whole process) | floor: MCP client alone | LangGraph (after imports) | LangGraph ÷ pipec | pipec ÷ floor |")
print("| ---: | ---: | ---: | ---: | ---: | ---: |")
for n in sizes:
    p, f, l = med("pipec", n), med("floor", n), med("langgraph", n)
    print(f"| {n:,} | {p:.0f} ms | {f:.0f} ms | {l:.0f} ms | {l / p:.1f}× | {p / f:.2f}× |")
print()
print(f"fdatasyncs for 1,000 calls: {syncs} ({syncs / 1000:.3f} per call); store: {store_bytes:,} bytes ({store_bytes / 1000:.0f} per call, the file's size)")
print()
print("| calls | peak RSS |")
print("| ---: | ---: |")
for r in rss:
    print(f"| {r['n']:,} | {r['rss_kb'] / 1024:.0f} MB |")
base = next(r["rss_kb"] for r in rss if r["n"] == 1000)
top = next(r["rss_kb"] for r in rss if r["n"] == 20000)
print(f"\nRSS at 20,000 ÷ at 1,000: {top / base:.2f}")
json.dump({"rounds": rows, "rss": rss, "fdatasyncs_1000": syncs, "store_bytes_1000": store_bytes}, open(out, "w"), indent=1)
EOF
echo "(all measurements: $out)" >&2
