#!/usr/bin/env bash
# `pipec check` of a chain of N pure nodes, whole process, two pipec executables side by
# side, alternating in every round: wall time (median, 10th and 90th percentile) and
# peak RSS. The chain is `node nI(p: int = nI-1) -> int { return = p }`.
#
#   bench/check_compare.sh BEFORE_PIPEC AFTER_PIPEC [ROUNDS]
#
# To compare with an earlier commit, build it in a worktree first:
#   git worktree add /tmp/before <commit> && (cd /tmp/before && cargo build --release)
set -euo pipefail
before="$1"
after="$2"
rounds="${3:-21}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python3 - "$before" "$after" "$rounds" "$work" <<'EOF'
import os, statistics, subprocess, sys, time

before, after, rounds, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
files = []
for n in (1000, 10000):
    path = os.path.join(work, f"chain{n}.pipe")
    with open(path, "w") as f:
        f.write("input seed: int\n\nnode n0(p: int = input.seed) -> int {\n  return = p\n}\n")
        for i in range(1, n):
            f.write(f"node n{i}(p: int = n{i-1}) -> int {{\n  return = p\n}}\n")
        f.write(f"\noutput last: int = n{n-1}\n")
    files.append((n, path))

def once(exe, path):
    start = time.perf_counter()
    p = subprocess.Popen([exe, "check", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    took = (time.perf_counter() - start) * 1000
    if status != 0:
        sys.exit(f"{exe} check {path} failed ({status})")
    return took, usage.ru_maxrss / 1024

results = {}
for _ in range(rounds):
    for n, path in files:
        for side, exe in (("before", before), ("after", after)):
            results.setdefault((n, side), []).append(once(exe, path))

def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]

print(f"{'nodes':>6} {'side':>7} {'median':>9} {'p10':>9} {'p90':>9} {'peak RSS':>9}")
for (n, side), runs in sorted(results.items(), key=lambda kv: (kv[0][0], kv[0][1] != "before")):
    times = [t for t, _ in runs]
    rss = statistics.median(m for _, m in runs)
    print(f"{n:>6} {side:>7} {statistics.median(times):>7.1f}ms {pct(times, .1):>7.1f}ms "
          f"{pct(times, .9):>7.1f}ms {rss:>6.1f} MB")
for n, _ in files:
    b = statistics.median(t for t, _ in results[(n, "before")])
    a = statistics.median(t for t, _ in results[(n, "after")])
    print(f"{n} nodes: before ÷ after = {b / a:.2f}×")
a1 = statistics.median(t for t, _ in results[(1000, "after")])
a10 = statistics.median(t for t, _ in results[(10000, "after")])
print(f"after, 1,000 → 10,000 nodes: {a10 / a1:.2f}× the time (linear is 10×)")
EOF
