#!/usr/bin/env bash
# Side-by-side durable-run figures: pipec's runtime benchmark and the LangGraph + SQLite
# peer harness (sections a, b, e), run alternately on the same machine, then one table of
# medians and ratios with the goals they are held to.
#
#   bench/compare.sh              # 2 rounds of each (~6 min on 2 cores)
#   bench/compare.sh --quick      # 1 round, few repetitions (a smoke run)
#
# Environment:
#   PEER_DIR      the peer harness (default: ../shared/peers next to this checkout);
#                 its run.sh creates a virtualenv and installs LangGraph with pip
#   ROUNDS        rounds of alternation (default 2, or 1 with --quick)
#   BENCH_TMPDIR  where both sides put their database files (default: the temp dir)
#   OUT           where the combined JSON goes (default: target/compare.json)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
peer="${PEER_DIR:-$here/../shared/peers}"
quick=()
if [ "${1:-}" = "--quick" ]; then
    quick=(--quick)
fi
rounds="${ROUNDS:-$([ ${#quick[@]} -gt 0 ] && echo 1 || echo 2)}"
out="${OUT:-$here/target/compare.json}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [ ! -x "$peer/run.sh" ]; then
    echo "error: no peer harness at $peer (set PEER_DIR)" >&2
    exit 2
fi
export BENCH_TMPDIR="${BENCH_TMPDIR:-${TMPDIR:-/tmp}}"

cd "$here"
echo "building the benchmark (release)" >&2
cargo bench --bench runtime --no-run >/dev/null 2>&1 || cargo bench --bench runtime --no-run

for r in $(seq 1 "$rounds"); do
    echo "round $r/$rounds: pipec" >&2
    cargo bench -q --bench runtime -- "${quick[@]}" --skip-list --json "$work/pipec-$r.json" >&2
    echo "round $r/$rounds: LangGraph + SQLite" >&2
    PEER_RESULTS="$work/peer-$r.json" "$peer/run.sh" "${quick[@]}" --only abe >&2
done

python3 - "$work" "$rounds" "$out" <<'PY'
import json, statistics, sys, pathlib

work, rounds, out = pathlib.Path(sys.argv[1]), int(sys.argv[2]), pathlib.Path(sys.argv[3])

def load(prefix):
    runs = []
    for r in range(1, rounds + 1):
        doc = json.loads((work / f"{prefix}-{r}.json").read_text())
        rows = doc["results"] if isinstance(doc, dict) else doc
        runs.append({row["id"]: row["median"] for row in rows})
    # The median over rounds of each measurement's median.
    ids = set().union(*runs)
    return {i: statistics.median([run[i] for run in runs if i in run]) for i in ids}

p, g = load("pipec"), load("peer")

def row(what, ours, theirs, unit, goal=None, higher_is_better=True):
    ratio = theirs / ours if higher_is_better else ours / theirs
    return {"what": what, "pipec": ours, "peer": theirs, "unit": unit, "ratio": ratio, "goal": goal}

rows = [
    row("100-node chain, per step (LangGraph async durability)", p["chain100.return.step_ms"], g["a.step_ms.sqlite_async"], "ms", ">= 10x"),
    row("100-node chain, per step (LangGraph sync durability)", p["chain100.return.step_ms"], g["a.step_ms.sqlite_sync"], "ms"),
    row("store bytes a 100-node run adds", p["chain100.return.run_bytes"], g["a.db_bytes_per_step.sqlite_async"] * 100, "B", ">= 20x"),
    row("payload bytes of a 100-node run", p["chain100.return.payload_bytes"], g["a.payload_bytes_per_step.sqlite_async"] * 100, "B"),
    row("file of a fresh store after one 100-node run", p["chain100.return.file_bytes"], g["a.db_bytes_per_step.sqlite_async"] * 100, "B"),
    row("gate: run to the pause", p["gate.pause_ms"], g["b.gate_pause_ms"], "ms"),
    row("gate: warm resume", p["gate.resume_warm_ms"], g["b.gate_resume_warm_ms"], "ms"),
    row("cold start to the gate (fresh process)", p["cold_to_gate_wall_ms"], g["e.cold_to_gate_wall_ms"], "ms"),
    row("cold resume to completion (fresh process)", p["cold_resume_wall_ms"], g["b.gate_resume_cold_wall_ms"], "ms", ">= 50x"),
]
# Paired: each exec chain next to 100 runs of the subprocess alone (see the benchmark).
durable = p.get("exec.durable_ms", p["chain100.exec.step_ms"] - p["exec.run_ms"])
linear = p["chain200.return.run_bytes"] / p["chain100.return.run_bytes"]

print()
print(f"{'measurement':<50} {'pipec':>12} {'LangGraph':>12} {'ratio':>9}  goal")
for r in rows:
    fmt = (lambda v: f"{v:12.3f}") if r["unit"] == "ms" else (lambda v: f"{v:12,.0f}")
    print(f"{r['what']:<50} {fmt(r['pipec'])} {fmt(r['peer'])} {r['ratio']:8.1f}x  {r['goal'] or ''}")
print()
print(f"durable cost of an exec step: {durable:.3f} ms = {durable / p['commit_ms']:.2f}x one commit "
      f"({p['commit_ms']:.3f} ms)  goal <= 2x")
print(f"  (exec step {p['chain100.exec.step_ms']:.3f} ms, the subprocess alone {p['exec.run_ms']:.3f} ms;"
      f" the durable cost is the median of paired differences)")
print(f"in-process (host) effect step: {p['chain100.host.step_ms']:.3f} ms = "
      f"{p['chain100.host.step_ms'] / p['commit_ms']:.2f}x one commit")
if p.get("chain100.exec.minor_faults"):
    print(f"minor page faults per step: exec chain {p['chain100.exec.minor_faults']:.0f}, "
          f"host chain {p['chain100.host.minor_faults']:.0f}, subprocess alone {p['exec.run.minor_faults']:.0f}")
print(f"store bytes, 200-node run / 100-node run: {linear:.2f}  goal <= 2.2")
print(f"one fdatasync of 4 KB on this disk: {g['a.fdatasync_4k_ms']:.3f} ms (LangGraph harness)")

out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps({"pipec": p, "peer": g, "rows": rows, "exec_durable_ms": durable,
                           "exec_durable_commits": durable / p["commit_ms"], "linear_200_100": linear}, indent=2))
print(f"\nwritten to {out}")
PY
