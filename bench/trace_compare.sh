#!/usr/bin/env bash
# What tracing costs on the 100-node chain of pure steps (`chain100.return.step_ms`):
#
# 1. on against off, in one binary (`benches/trace.rs`): the chain with every span
#    exported over OTLP/HTTP to a local receiver, and without a span sink, alternating;
# 2. off against before tracing existed: `benches/runtime.rs`'s chain in this checkout and
#    in BASELINE_DIR (a checkout of an earlier commit, with its own target/), alternating
#    round by round.
#
#   bench/trace_compare.sh                             # part 1 only
#   BASELINE_DIR=/path/to/old/checkout ROUNDS=3 bench/trace_compare.sh
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${ROUNDS:-3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cargo bench -q --bench trace --no-run
echo "--- tracing on against off (benches/trace.rs)"
cargo bench -q --bench trace -- --json "$work/trace.json"

if [ -n "${BASELINE_DIR:-}" ]; then
  (cd "$BASELINE_DIR" && cargo bench -q --bench runtime --no-run)
  cargo bench -q --bench runtime --no-run
  for r in $(seq 1 "$rounds"); do
    echo "round $r/$rounds"
    (cd "$BASELINE_DIR" && cargo bench -q --bench runtime -- --quick --skip-list --json "$work/base-$r.json" >/dev/null)
    cargo bench -q --bench runtime -- --quick --skip-list --json "$work/head-$r.json" >/dev/null
  done
  python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys, pathlib
work, rounds = pathlib.Path(sys.argv[1]), int(sys.argv[2])
def chain(prefix):
    values = []
    for r in range(1, rounds + 1):
        doc = json.loads((work / f"{prefix}-{r}.json").read_text())
        rows = doc["results"] if isinstance(doc, dict) else doc
        values += [row["median"] for row in rows if row["id"] == "chain100.return.step_ms"]
    return statistics.median(values)
base, head = chain("base"), chain("head")
print("--- tracing off against before tracing (benches/runtime.rs, medians of the rounds)")
print(f"{'chain100.return.step_ms':<34} {'before':>10} {'off':>10} {'ratio':>8}")
print(f"{'':<34} {base:>10.4f} {head:>10.4f} {head / base:>7.3f}x")
PY
fi
