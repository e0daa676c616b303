#!/usr/bin/env bash
# MCP client figures side by side with the official Python SDK: pipec's client benchmark
# (benches/mcp.rs) and the peer harness's section d, run alternately on the same machine
# against the same Python CRM server, then one table of medians and ratios with the
# goals they are held to. Per call, also what each client adds to the server's own floor:
# the same request written and its answer read back by a bare exchange, no client at all.
# For reference, both clients also run against pipec-demo-crm, whose answers cost the
# server almost nothing, so there a round trip is mostly the client's.
#
#   bench/mcp_compare.sh              # 3 rounds of each (~5 min on 2 cores)
#   bench/mcp_compare.sh --quick      # 1 round, few repetitions (a smoke run)
#
# Environment:
#   PEER_DIR      the peer harness (default: ../shared/peers next to this checkout)
#   PEER_VENV     its virtualenv (default: ~/.cache/pipec-peers-venv; the harness's
#                 run.sh creates it and installs the MCP SDK with pip)
#   ROUNDS        rounds of alternation (default 3, or 1 with --quick)
#   CRM_EMAILS    the corpus (default 5000 emails, about 5 MB)
#   OUT           where the combined JSON goes (default: target/mcp_compare.json)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
peer="${PEER_DIR:-$here/../shared/peers}"
venv="${PEER_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/pipec-peers-venv}"
quick=()
if [ "${1:-}" = "--quick" ]; then
    quick=(--quick)
elif [ -n "${1:-}" ]; then
    echo "error: unknown argument \`$1\`" >&2
    echo "  help: bench/mcp_compare.sh [--quick]" >&2
    exit 2
fi
rounds="${ROUNDS:-$([ ${#quick[@]} -gt 0 ] && echo 1 || echo 3)}"
out="${OUT:-$here/target/mcp_compare.json}"
export CRM_EMAILS="${CRM_EMAILS:-5000}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if [ ! -x "$peer/run.sh" ]; then
    echo "error: no peer harness at $peer" >&2
    echo "  help: set PEER_DIR to the folder holding run.sh and bench_langgraph.py" >&2
    exit 2
fi

cd "$here"
echo "building the benchmark and pipec-demo-crm (release)" >&2
cargo build -q --release --bin pipec-demo-crm
cargo bench --bench mcp --no-run >/dev/null 2>&1 || cargo bench --bench mcp --no-run
demo="$here/target/release/pipec-demo-crm"

# The peer's run.sh makes the venv on first use; a first round of it would include the
# install, so it is run once here when the venv is missing.
if [ ! -x "$venv/bin/python" ]; then
    echo "creating the peer's venv" >&2
    PEER_VENV="$venv" PEER_RESULTS="$work/setup.json" "$peer/run.sh" --quick --only d >/dev/null
fi
export PEER_VENV="$venv" PEER_DIR="$peer" PEER_PYTHON="$venv/bin/python"

for r in $(seq 1 "$rounds"); do
    echo "round $r/$rounds: pipec (Python server, then pipec-demo-crm)" >&2
    cargo bench -q --bench mcp -- "${quick[@]}" --json "$work/pipec-$r.json" >&2
    echo "round $r/$rounds: Python SDK (section d, then against pipec-demo-crm)" >&2
    PEER_RESULTS="$work/peer-$r.json" "$peer/run.sh" "${quick[@]}" --only d >&2
    "$venv/bin/python" bench/peer_mcp_demo.py --demo "$demo" --peer-dir "$peer" \
        "${quick[@]}" --out "$work/peerdemo-$r.json" >&2
done

python3 - "$work" "$rounds" "$out" <<'PY'
import json, statistics, sys, pathlib

work, rounds, out = pathlib.Path(sys.argv[1]), int(sys.argv[2]), pathlib.Path(sys.argv[3])

def rounds_of(*prefixes):
    """Each round's rows, by id."""
    runs = []
    for r in range(1, rounds + 1):
        rows = {}
        for prefix in prefixes:
            doc = json.loads((work / f"{prefix}-{r}.json").read_text())
            rows.update({row["id"]: row for row in doc["results"]})
        runs.append(rows)
    return runs

def summary(runs):
    """The median over rounds of each measurement's median (and of its p95)."""
    ids = set().union(*runs)
    pick = lambda i, k: statistics.median([run[i][k] for run in runs if i in run])
    return {i: {"median": pick(i, "median"), "p95": pick(i, "p95"),
                "rounds": [run[i]["median"] for run in runs if i in run]} for i in ids}

p_runs, g_runs = rounds_of("pipec"), rounds_of("peer", "peerdemo")
p, g = summary(p_runs), summary(g_runs)

MEASUREMENTS = [
    ("session_start_ms", "session start (spawn + handshake)", "ms", None),
    ("session_close_ms", "session close (server exit)", "ms", None),
    ("call_tool_get_deal_ms", "call_tool get_deal (x200)", "ms", None),
    ("read_resource_small_ms", "small read, one day (x200)", "ms", None),
    ("read_resource_corpus_ms", "5 MB read (x10)", "ms", "corpus"),
    ("read_resource_corpus_MBps", "5 MB read, throughput", "MB/s", "corpus"),
    ("dead_link_error_ms", "dead link error (x10)", "ms", None),
]
# What a client adds to a call: its round trip less the server's floor (a bare line
# written and read back, timed by pipec's benchmark in the same round), per round.
OVERHEADS = [
    ("call_tool_get_deal_ms", "get_deal, client's part", "small"),
    ("read_resource_small_ms", "small read, client's part", "small"),
    ("read_resource_corpus_ms", "5 MB read, client's part", None),
]
GOALS = {"small": (">= 1.5x", 1.5), "corpus": (">= 0.91x (within 10 %)", 1 / 1.1)}

def overhead(runs, i, floor):
    per_round = [run[i]["median"] - fl[floor]["median"]
                 for run, fl in zip(runs, p_runs) if i in run and floor in fl]
    return statistics.median(per_round) if per_round else None, per_round

rows = []
for server, prefix in (("Python CRM server", "d"), ("pipec-demo-crm", "demo")):
    for key, what, unit, goal in MEASUREMENTS:
        i = f"{prefix}.{key}"
        if i not in p or i not in g:
            continue
        ours, theirs = p[i]["median"], g[i]["median"]
        # Ratios read "how many times better pipec is": times divide the other way.
        ratio = ours / theirs if unit == "MB/s" else theirs / ours
        # The 5 MB goal is against the Python client on the same server.
        label, threshold = GOALS[goal] if goal and prefix == "d" else (None, None)
        met = None if threshold is None else ratio >= threshold
        rows.append({"server": server, "id": i, "what": what, "unit": unit,
                     "pipec": ours, "python": theirs, "ratio": ratio,
                     "pipec_p95": p[i]["p95"], "python_p95": g[i]["p95"],
                     "pipec_rounds": p[i]["rounds"], "python_rounds": g[i]["rounds"],
                     "goal": label, "met": met})
    floor_rows = []
    for key, what, goal in OVERHEADS:
        i, f = f"{prefix}.{key}", f"{prefix}.floor_{key}"
        if f not in p:
            continue
        ours, ours_rounds = overhead(p_runs, i, f)
        theirs, theirs_rounds = overhead(g_runs, i, f)
        if ours is None or theirs is None:
            continue
        ratio = theirs / ours if ours > 0 else float("inf")
        label, threshold = GOALS[goal] if goal else (None, None)
        met = None if threshold is None else ratio >= threshold
        floor_rows.append({"server": server, "id": i + ".overhead", "what": what, "unit": "ms",
                           "pipec": ours, "python": theirs, "ratio": ratio,
                           "floor": p[f]["median"], "pipec_rounds": ours_rounds,
                           "python_rounds": theirs_rounds, "goal": label, "met": met})
    rows.extend(floor_rows)

print()
for server in ("Python CRM server", "pipec-demo-crm"):
    print(f"against the {server}: medians of {rounds} rounds' medians")
    print(f"  {'measurement':<36} {'pipec':>10} {'Python SDK':>11} {'ratio':>8}  goal")
    mine = [r for r in rows if r["server"] == server]
    for r in mine:
        if r is next((x for x in mine if x["id"].endswith(".overhead")), None):
            floors = ", ".join(f"{x['floor']:.3f}" for x in mine if x["id"].endswith(".overhead"))
            print(f"  round trip less the server's floor ({floors} ms):")
        mark = "" if r["met"] is None else ("  met" if r["met"] else "  MISSED")
        print(f"  {r['what']:<36} {r['pipec']:>10.3f} {r['python']:>11.3f} {r['ratio']:>7.2f}x  "
              f"{r['goal'] or ''}{mark}   [{r['unit']}]")
    print()
print("ratio: the Python SDK's time / pipec's (throughput: pipec's / the Python SDK's);")
print("above 1 means pipec is faster. The floor is the same request written as one line and")
print("its answer read back unparsed, by pipec's benchmark in the same round.")

out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps({"pipec": p, "python": g, "rows": rows, "rounds": rounds}, indent=2))
print(f"\nwritten to {out}")
PY
