#!/usr/bin/env bash
# What the deal-research scenario leaves in the store: pipelines/deal_research.pipe run to
# its gate (the scripted replies: the agent calls get_deal, whose result links the deal's
# 5 MB email history) against the Python CRM server and against pipec-demo-crm. Each server
# gets a fresh store and two threads, one after the other, and after each `pipec store
# stats` is read:
#   - stored: the bytes of the tables' rows (keys and values) plus redb's per-row metadata;
#     after the first thread this includes the plan (stored once per plan) and the store's
#     own meta rows, so the second thread's increment is what one more thread costs;
#   - in use: the pages redb has allocated to the tables (4 KiB each);
#   - file: the store file's size, which redb grows in large steps ahead of use.
# The Python peer's figure for the same thing is the SQLite file of a LangGraph thread that
# keeps the link: 49,152 bytes (56.7 MB when the corpus itself is in the state).
#
#   bench/mcp_store_bytes.sh
#
# Environment: CRM_EMAILS (default 5000, about 5 MB of history), PEER_DIR, PEER_VENV (as in
# bench/mcp_compare.sh), PIPEC (default: target/release/pipec of this checkout, built here).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
peer="${PEER_DIR:-$here/../shared/peers}"
venv="${PEER_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/pipec-peers-venv}"
export CRM_EMAILS="${CRM_EMAILS:-5000}"
if [ -n "${1:-}" ]; then
    echo "error: bench/mcp_store_bytes.sh takes no arguments, not \`$1\`" >&2
    echo "  help: set CRM_EMAILS, PEER_DIR, PEER_VENV or PIPEC instead" >&2
    exit 2
fi
server_script="$peer/crm_server.py"
[ -f "$server_script" ] || server_script="$here/tests/interop/crm_server.py"
if [ ! -x "$venv/bin/python" ]; then
    echo "error: no Python with the MCP SDK at $venv/bin/python" >&2
    echo "  help: run $peer/run.sh --quick --only d once (it makes the venv), or set PEER_VENV" >&2
    exit 2
fi

cd "$here"
if [ -z "${PIPEC:-}" ]; then
    cargo build -q --release --bin pipec --bin pipec-demo-crm
    PIPEC="$here/target/release/pipec"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# A project holding the scenario with the given server block in place of the pipeline's.
project() {
    local dir="$1" block="$2"
    mkdir -p "$dir/prompts/research" "$dir/prompts/consume"
    cp prompts/research/scan.jinja "$dir/prompts/research/"
    cp prompts/consume/brief.jinja "$dir/prompts/consume/"
    cp pipelines/replies/deal_research.json "$dir/replies.json"
    BLOCK="$block" python3 - pipelines/deal_research.pipe "$dir/deal_research.pipe" <<'PY'
import os, sys
text = open(sys.argv[1]).read()
start = text.index("server crm {")
end = text.index("\n}\n", start) + 2
open(sys.argv[2], "w").write(text[:start] + os.environ["BLOCK"] + text[end:])
PY
}

env_block='  env = { CRM_EMAILS: env("CRM_EMAILS", default: "100") }'
demo_block="server crm {
  command = \"$here/target/release/pipec-demo-crm\"
$env_block
}"
python_block="server crm {
  command = \"$venv/bin/python\"
  args = [\"$server_script\"]
$env_block
}"

# The stored bytes (rows plus metadata), the bytes in use and the file size of a store.
stats() {
    python3 - "$1" <<'PY2'
import re, sys
text = open(sys.argv[1]).read()
total = re.search(r"^total\s+(\d+)\s+(\d+)", text, re.M)
file = re.search(r"^file: (\d+) bytes, (\d+) in use", text, re.M)
if not total or not file:
    sys.exit("pipec store stats printed no total and file line")
print(int(total.group(1)) + int(total.group(2)), file.group(2), file.group(1))
PY2
}

printf '%-16s %-8s %10s %10s %10s\n' server thread stored "in use" file
for name in python pipec-demo-crm; do
    dir="$work/$name"
    if [ "$name" = python ]; then project "$dir" "$python_block"; else project "$dir" "$demo_block"; fi
    store="$dir/runs.redb"
    prev=(0 0 0)
    for thread in 1 2; do
        set +e
        (cd "$dir" && "$PIPEC" run deal_research.pipe --store "$store" --input deal_id=D1 \
            --model fast=scripted:replies.json --detailed-exitcode -q >"$work/$name.out" 2>"$work/$name.err")
        status=$?
        set -e
        if [ "$status" -ne 3 ]; then
            echo "error: the run against $name did not pause at its gate (exit $status)" >&2
            cat "$work/$name.err" >&2
            exit 1
        fi
        if grep -q '"subject"' "$store"; then
            echo "error: an email reached the store of the run against $name" >&2
            exit 1
        fi
        "$PIPEC" store stats --store "$store" >"$work/$name-$thread.stats"
        read -r -a now <<<"$(stats "$work/$name-$thread.stats")"
        printf '%-16s %-8s %10s %10s %10s\n' "$name" "$thread" "${now[0]}" "${now[1]}" "${now[2]}"
        if [ "$thread" = 2 ]; then
            printf '%-16s %-8s %10s %10s %10s\n' "$name" "2nd - 1st" "$((now[0] - prev[0]))" \
                "$((now[1] - prev[1]))" "$((now[2] - prev[2]))"
        fi
        prev=("${now[@]}")
    done
    echo "--- pipec store stats after the first thread ($name)" >&2
    cat "$work/$name-1.stats" >&2
done
