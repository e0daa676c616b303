#!/usr/bin/env bash
# Durable runs on PostgreSQL side by side: pipec's per-step cost on its PostgreSQL store and
# on redb, LangGraph's AsyncPostgresSaver on the same server, alternated round by round;
# then the durable steps per second of 1, 2 and 4 `pipec worker` processes on one database;
# then `pipec runs` and `pipec show` with 100,000 threads in the database (10,000 with --quick).
#
#   bench/pg_compare.sh            # 3 rounds (~4 min on 2 cores)
#   bench/pg_compare.sh --quick    # 1 round, fewer runs
#
# Environment:
#   PIPEC_BENCH_POSTGRES  a server URL to use (its databases pipec_bench and lg_bench are
#                         dropped and made again); default: a throwaway server under
#                         target/pg-bench, started and stopped here
#   ROUNDS                rounds of alternation (default 3, or 1 with --quick)
#   OUT                   the combined JSON (default target/pg_compare.json)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
quick=()
[ "${1:-}" = "--quick" ] && quick=(--quick)
rounds="${ROUNDS:-$([ ${#quick[@]} -gt 0 ] && echo 1 || echo 3)}"
out="${OUT:-$here/target/pg_compare.json}"
work="$(mktemp -d)"
server_dir=""

cleanup() {
    if [ -n "$server_dir" ]; then
        runuser -u postgres -- "$pgbin/pg_ctl" -D "$server_dir/data" -m fast stop >/dev/null 2>&1 || true
        rm -rf "$server_dir"
    fi
    rm -rf "$work"
}
trap cleanup EXIT

base="${PIPEC_BENCH_POSTGRES:-}"
if [ -z "$base" ]; then
    pgbin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
    if [ -z "$pgbin" ]; then
        echo "error: no PostgreSQL server here (apt-get install postgresql, or set PIPEC_BENCH_POSTGRES)" >&2
        exit 2
    fi
    server_dir="$here/target/pg-bench"
    rm -rf "$server_dir"
    mkdir -p "$server_dir"
    as=()
    if [ "$(id -u)" = 0 ]; then
        chown postgres "$server_dir"
        as=(runuser -u postgres --)
    fi
    port=$((20000 + RANDOM % 20000))
    "${as[@]}" "$pgbin/initdb" -D "$server_dir/data" -A trust -U postgres >/dev/null
    "${as[@]}" "$pgbin/pg_ctl" -D "$server_dir/data" -l "$server_dir/log" -w \
        -o "-k $server_dir -p $port -c listen_addresses=127.0.0.1" start >/dev/null
    base="postgresql://postgres@127.0.0.1:$port/postgres"
fi
db_url() { echo "${base%/*}/$1"; }
psql "$base" -qAtc "DROP DATABASE IF EXISTS pipec_bench" -c "CREATE DATABASE pipec_bench" \
    -c "DROP DATABASE IF EXISTS lg_bench" -c "CREATE DATABASE lg_bench" >/dev/null

venv="$here/target/bench-pg-venv"
if ! "$venv/bin/python" -c "import langgraph.checkpoint.postgres.aio, psycopg" 2>/dev/null; then
    echo "installing LangGraph and its Postgres checkpointer into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check \
        langgraph==1.2.24 langgraph-checkpoint-postgres==3.2.0 "psycopg[binary]==3.3.9" psycopg-pool==3.3.3
fi

echo "building pipec and the benchmark (release)" >&2
cargo build -q --release --bin pipec
cargo bench -q --bench postgres --no-run >/dev/null 2>&1 || cargo bench --bench postgres --no-run

runs=$([ ${#quick[@]} -gt 0 ] && echo 3 || echo 10)
for r in $(seq 1 "$rounds"); do
    echo "round $r/$rounds: pipec (redb and PostgreSQL)" >&2
    cargo bench -q --bench postgres -- --url "$(db_url pipec_bench)" --only steps "${quick[@]}" \
        --json "$work/pipec-$r.json" >&2
    echo "round $r/$rounds: LangGraph AsyncPostgresSaver" >&2
    "$venv/bin/python" bench/peer_langgraph_pg.py --url "$(db_url lg_bench)" --runs "$runs" \
        > "$work/peer-$r.json"
done
echo "workers: 1, 2 and 4 on one database" >&2
cargo bench -q --bench postgres -- --url "$(db_url pipec_bench)" --only workers "${quick[@]}" \
    --json "$work/workers.json" >&2

echo "listing: pipec runs and pipec show with many threads" >&2
cargo bench -q --bench postgres -- --url "$(db_url pipec_bench)" --only listing "${quick[@]}" \
    --json "$work/listing.json" >&2

python3 - "$work" "$rounds" "$out" "$(nproc)" <<'PY'
import json, pathlib, statistics, sys
work, rounds, out, cores = pathlib.Path(sys.argv[1]), int(sys.argv[2]), pathlib.Path(sys.argv[3]), sys.argv[4]
def load(prefix):
    docs = [json.loads((work / f"{prefix}-{r}.json").read_text()) for r in range(1, rounds + 1)]
    return {k: statistics.median(d[k] for d in docs) for k in docs[0]}
p, g = load("pipec"), load("peer")
w = json.loads((work / "workers.json").read_text())
rows = [
    ("per step, pipec on PostgreSQL", p["steps.postgres.step_ms"]),
    ("per step, pipec on redb", p["steps.redb.step_ms"]),
    ("per step, LangGraph AsyncPostgresSaver, durability=sync", g["langgraph_pg.sync.step_ms"]),
    ("per step, LangGraph AsyncPostgresSaver, durability=async", g["langgraph_pg.async.step_ms"]),
    ("per step, LangGraph InMemorySaver (its floor)", g["langgraph_memory.step_ms"]),
]
print()
print(f"{'measurement (100-node chain of no-op steps)':<58} {'ms':>9}")
for what, v in rows:
    print(f"{what:<58} {v:9.3f}")
best_lg = min(g["langgraph_pg.sync.step_ms"], g["langgraph_pg.async.step_ms"])
print(f"\nLangGraph's faster Postgres mode / pipec on PostgreSQL: {best_lg / p['steps.postgres.step_ms']:.1f}x  goal >= 5x")
print(f"\n{'pipec workers on one database (' + cores + ' cores)':<58} {'steps/s':>9} {'CPU ms/step':>12}")
for feed, how in [("workers", "submitted meanwhile"), ("backlog", "submitted before")]:
    counts = sorted({int(k.split('.')[1]) for k in w if k.startswith(feed + ".")})
    for n in counts:
        cpu = w.get(f"{feed}.{n}.cpu_ms_per_step")
        shown = f"{cpu:12.3f}" if cpu is not None else f"{'':>12}"
        print(f"{str(n) + ' worker(s), 5-node runs ' + how:<58} {w[f'{feed}.{n}.steps_per_s']:9.0f} {shown}")
print("goal: >= 2,000 durable steps/s across 4 workers, rising with workers up to the cores")
l = json.loads((work / "listing.json").read_text())
n = int(l["listing.threads"])
print(f"\n{f'with {n:,} threads in the database (process wall time)':<58} {'ms':>9}")
print(f"{'pipec runs (first page), median':<58} {l['listing.runs_ms']:9.1f}")
print(f"{'pipec runs (first page), p90':<58} {l['listing.runs_p90_ms']:9.1f}")
print(f"{'pipec runs --status completed, median':<58} {l['listing.runs_status_ms']:9.1f}")
print(f"{'pipec show THREAD, median':<58} {l['listing.show_ms']:9.1f}")
print(f"{'pipec show THREAD, p90':<58} {l['listing.show_p90_ms']:9.1f}")
print("goal: runs < 50 ms, show < 20 ms")
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps({"pipec": p, "langgraph": g, "workers": w, "listing": l}, indent=2))
print(f"\nwritten to {out}")
PY
