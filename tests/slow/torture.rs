//! Crash torture: `kill -9` at random points of a 20-node pipeline whose steps are
//! effects, one process at a time and then four at once. Every thread must end with the
//! outputs of an uninterrupted run; every try of a call carries the same call key
//! (`PIPEC_CALL_KEY`), so a command can deduplicate a retry; a node's effect may repeat
//! only as often as a person explicitly retried an unfinished call; and the store must
//! pass its integrity check.
//!
//! Each variant runs on a redb file (`on_redb::`) and on PostgreSQL (`on_postgres::`),
//! where a killed process's lease holds its thread until it expires (1.5 s here): the
//! driver waits for that before the next process, as a person would.
//!
//! `PIPEC_TORTURE_KILLS` sets how many kills each variant makes (default 5, or 50 under
//! `PIPEC_TEST_FULL=1`).

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::rng::{Rng, clock_seed};
use common::*;

pub(crate) const STEPS: usize = 20;

/// A 20-node chain of effects (some idempotent, some pure, some fan-ins) that starts from `seed`.
pub(crate) fn pipeline() -> String {
    let mut s = String::from("type Step {\n  v: int\n}\n\ninput seed: int\n\n");
    s.push_str("node s0(seed: int = input.seed) -> Step {\n  exec = [\"./step.sh\"]\n}\n\n");
    for i in 1..STEPS {
        let prev = format!("s{}", i - 1);
        match i % 4 {
            // A pure step: recomputed after a crash, never journaled.
            1 => s.push_str(&format!("node s{i}(prev: Step = {prev}) -> Step {{\n  return = {{ v: prev.v }}\n}}\n\n")),
            // An idempotent effect: may repeat after a crash.
            2 => s.push_str(&format!("node s{i}(prev: Step = {prev}) -> Step {{\n  exec = [\"./step.sh\"]\n  idempotent = true\n}}\n\n")),
            // A fan-in of two effects.
            3 if i >= 3 => s.push_str(&format!(
                "node s{i}(prev: Step = {prev}, other: Step = s{}) -> Step {{\n  exec = [\"./step.sh\"]\n}}\n\n",
                i - 3
            )),
            _ => s.push_str(&format!("node s{i}(prev: Step = {prev}) -> Step {{\n  exec = [\"./step.sh\"]\n}}\n\n")),
        }
    }
    s.push_str(&format!("output last = s{}\n", STEPS - 1));
    s
}

/// Adds one to `prev.v` (or the seed) after a short random sleep, and logs the effect.
/// Shell builtins only, but for `sleep`: the torture starts thousands of steps, and each
/// process a step starts is time the test spends without testing anything.
pub(crate) const STEP: &str = r#"#!/bin/sh
IFS= read -r input
case "$input" in
  *'"prev":{"v":'*) v=${input#*'"prev":{"v":'} ;;
  *) v=${input#*'"seed":'} ;;
esac
v=${v%%[!0-9]*}
ms=$(( $$ % 20 ))
if [ "$ms" -lt 10 ]; then sleep "0.00$ms"; else sleep "0.0$ms"; fi
echo "$PIPEC_THREAD $PIPEC_NODE $PIPEC_CALL_KEY" >> effects.log
printf '{"v":%d}\n' $((v + 1))
"#;

/// The value an uninterrupted run ends with: one per effect step along the chain.
pub(crate) fn expected(seed: i64) -> i64 {
    let effects = (0..STEPS).filter(|i| *i == 0 || i % 4 != 1).count() as i64;
    seed + effects
}

fn status(p: &Project, thread: &str) -> Option<serde_json::Value> {
    let out = p.run(&["show", thread, "--json", "--internal"]);
    (code(&out) == 0).then(|| json(&stdout(&out)))
}

fn kill(mut child: Child) {
    #[allow(unsafe_code)]
    let _ = child.kill();
    let _ = child.wait();
}

/// How one step of driving a thread went.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Drive {
    /// The thread is completed.
    Completed,
    /// The process was killed while it ran.
    Killed,
    /// The process ended by itself.
    Ended,
}

/// One step of driving a thread: start or continue it, and kill it after `delay`.
fn drive(p: &Project, thread: &str, delay: Option<Duration>) -> Drive {
    drive_recorded(p, thread, delay).0
}

/// One pipec process that drove a thread: its pid, when it started and when it was killed
/// (nanoseconds of the wall clock, as `date +%s%N` prints them).
#[derive(Clone, Copy, Debug)]
struct Life {
    pid: u32,
    started_ns: u128,
    killed_ns: Option<u128>,
}

fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// [`drive`], with the life of the pipec process it started, if any.
fn drive_recorded(p: &Project, thread: &str, delay: Option<Duration>) -> (Drive, Option<Life>) {
    let st = status(p, thread);
    let state = st
        .as_ref()
        .and_then(|s| s["status"].as_str().map(str::to_string))
        .unwrap_or_default();
    let args: Vec<String> = match (st.is_some(), state.as_str()) {
        (false, _) => vec![
            "run".into(),
            "tort.pipe".into(),
            "--thread".into(),
            thread.into(),
            "--input".into(),
            "seed=100".into(),
            "-q".into(),
        ],
        (_, "blocked") => vec![
            "resume".into(),
            thread.into(),
            "--retry-unfinished".into(),
            "all".into(),
            "-q".into(),
        ],
        (_, "completed") => return (Drive::Completed, None),
        _ => vec!["resume".into(), thread.into(), "-q".into()],
    };
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // What each process said goes to the thread's drive log, so a thread that does not
    // finish can be understood.
    let mut said = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(drive_log(p, thread))
        .expect("drive log");
    let _ = writeln!(said, "--- pipec {} (state {state:?})", args.join(" "));
    let started_ns = now_ns();
    let mut child = p
        .cmd(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::from(said))
        .spawn()
        .expect("spawn");
    let mut life = Life {
        pid: child.id(),
        started_ns,
        killed_ns: None,
    };
    if let Some(d) = delay {
        let start = Instant::now();
        while start.elapsed() < d {
            if let Ok(Some(s)) = child.try_wait() {
                note_exit(p, thread, s.code());
                return (Drive::Ended, Some(life));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        // Taken before the signal is sent: an effect is late only past the kill itself.
        life.killed_ns = Some(now_ns());
        kill(child);
        note_exit(p, thread, Some(-9));
        // On PostgreSQL the killed process's lease holds the thread until it expires.
        p.wait_not_held_by(thread, life.pid, PG_LEASE_TTL * 4);
        return (Drive::Killed, Some(life));
    }
    // Left to end by itself; one that does not end in minutes is hung, and what its
    // threads wait on says where.
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(s)) => {
                note_exit(p, thread, s.code());
                return (Drive::Ended, Some(life));
            }
            Ok(None) if start.elapsed() > HUNG => {
                let stacks = stacks_of(life.pid);
                kill(child);
                panic!(
                    "pipec {} (pid {}) did not end in {HUNG:?}; its threads:\n{stacks}\nwhat drove the thread:\n{}",
                    args.join(" "),
                    life.pid,
                    drive_tail(p, thread, 40)
                );
            }
            _ => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// How long a pipec process left to end by itself may take before it counts as hung.
const HUNG: Duration = Duration::from_secs(120);

/// Where each thread of process `pid` is: a backtrace by gdb when it is installed, else
/// what the kernel says each thread waits in.
fn stacks_of(pid: u32) -> String {
    let gdb = std::process::Command::new("timeout")
        .args([
            "60",
            "gdb",
            "-batch",
            "-p",
            &pid.to_string(),
            "-ex",
            "thread apply all bt",
        ])
        .stdin(Stdio::null())
        .output();
    if let Ok(out) = gdb
        && out.status.success()
    {
        return String::from_utf8_lossy(&out.stdout).into_owned();
    }
    let mut said = String::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            let path = t.path();
            let read = |f: &str| std::fs::read_to_string(path.join(f)).unwrap_or_default();
            said.push_str(&format!(
                "{}: {} in {}\n",
                t.file_name().to_string_lossy(),
                read("comm").trim(),
                read("wchan")
            ));
        }
    }
    said
}

/// Where the processes that drove `thread` wrote what they said.
fn drive_log(p: &Project, thread: &str) -> std::path::PathBuf {
    p.dir.join(format!("drive-{thread}.log"))
}

fn note_exit(p: &Project, thread: &str, code: Option<i32>) {
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .append(true)
        .open(drive_log(p, thread))
    {
        let _ = writeln!(f, "--- exit {code:?}");
    }
}

/// The last `lines` lines of what drove `thread`.
fn drive_tail(p: &Project, thread: &str, lines: usize) -> String {
    let all = std::fs::read_to_string(drive_log(p, thread)).unwrap_or_default();
    let v: Vec<&str> = all.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

fn is_idempotent(node: &str) -> bool {
    node.trim_start_matches('s')
        .parse::<usize>()
        .is_ok_and(|i| i % 4 == 2)
}

/// Checks every thread's outputs, the journal and the effect log.
fn verify(p: &Project, threads: &[String]) {
    let log = p.read("effects.log");
    let mut per_key: HashMap<String, usize> = HashMap::new();
    let mut idempotent_keys: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut per_node: BTreeMap<(String, String), usize> = BTreeMap::new();
    for line in log.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        if let [thread, node, key] = parts.as_slice() {
            if is_idempotent(node) {
                idempotent_keys.insert((*key).to_string());
            }
            *per_key.entry((*key).to_string()).or_default() += 1;
            *per_node
                .entry(((*thread).to_string(), (*node).to_string()))
                .or_default() += 1;
        }
    }
    for thread in threads {
        let st = status(p, thread).unwrap_or_else(|| panic!("thread {thread} is readable"));
        assert_eq!(st["status"], "completed", "thread {thread}: {st}");
        assert_eq!(
            st["outputs"]["last"]["v"],
            expected(100),
            "thread {thread} has the outputs of an uninterrupted run"
        );
        let calls = st["calls"].as_array().cloned().unwrap_or_default();
        // Every try of a call (node, generation, item, call index) has one key.
        let mut key_of: HashMap<String, String> = HashMap::new();
        let mut retried: HashMap<String, usize> = HashMap::new();
        for c in &calls {
            let shown = c["call"].as_str().unwrap_or("");
            let parts: Vec<&str> = shown.split(':').collect();
            let [node, generation, item, _step, call] = parts.as_slice() else {
                panic!("a call key of five parts: {shown}");
            };
            let call_id = format!("{node}:{generation}:{item}:{call}");
            let key = c["record"]["idem_key"].as_str().unwrap_or("").to_string();
            let first = key_of.entry(call_id.clone()).or_insert_with(|| key.clone());
            assert_eq!(
                *first, key,
                "thread {thread}: every try of {call_id} has the same PIPEC_CALL_KEY"
            );
            if c["record"]["decision"] == "retry requested" {
                *retried.entry(key).or_default() += 1;
            }
        }
        // A non-idempotent effect ran under its key once, plus once per explicit retry.
        for key in key_of.values() {
            if idempotent_keys.contains(key) {
                continue;
            }
            let n = per_key.get(key).copied().unwrap_or(0);
            let allowed = 1 + retried.get(key).copied().unwrap_or(0);
            assert!(
                n <= allowed,
                "thread {thread}: the effect with call key {key} ran {n} times with {} explicit retries",
                allowed - 1
            );
        }
        for ((t, node), n) in per_node.iter().filter(|((t, _), _)| t == thread) {
            if is_idempotent(node) {
                continue;
            }
            let node_retries: usize = calls
                .iter()
                .filter(|c| {
                    c["record"]["decision"] == "retry requested"
                        && c["call"].as_str().unwrap_or("").split(':').next() == Some(node.as_str())
                })
                .count();
            assert!(
                *n <= 1 + node_retries,
                "thread {t}, node {node}: the effect ran {n} times with {node_retries} explicit retries"
            );
        }
    }
    let out = p.run(&["store", "check"]);
    assert_eq!(code(&out), 0, "integrity check: {}", stderr(&out));
}

/// How often a person explicitly retried an unfinished call of each node of a thread.
fn explicit_retries(st: &serde_json::Value) -> HashMap<String, usize> {
    let mut retried: HashMap<String, usize> = HashMap::new();
    for c in st["calls"].as_array().into_iter().flatten() {
        if c["record"]["decision"] == "retry requested" {
            let node = c["call"]
                .as_str()
                .unwrap_or("")
                .split(':')
                .next()
                .unwrap_or("")
                .to_string();
            *retried.entry(node).or_default() += 1;
        }
    }
    retried
}

fn kills_wanted() -> usize {
    tier_size("PIPEC_TORTURE_KILLS", 5, 50)
}

fn project(store: &StoreKind, tag: &str) -> Project {
    let p = Project::on(store, tag);
    p.write("tort.pipe", &pipeline());
    p.script("step.sh", STEP);
    let out = p.run(&["check", "tort.pipe"]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    p
}

fn kill_9_at_random_points_one_process_at_a_time(store: &StoreKind) {
    let p = project(store, "torture1");
    let mut rng = Rng::from_clock();
    let want = kills_wanted();
    let mut kills = 0;
    let mut threads = Vec::new();
    // New threads until enough kills landed, each driven to completion.
    while kills < want || threads.len() < 3 {
        let thread = format!("01J{:023}", threads.len());
        let mut rounds = 0;
        loop {
            rounds += 1;
            assert!(rounds < 500, "thread {thread} does not finish");
            let delay = (kills < want).then(|| Duration::from_millis(5 + rng.millis(120)));
            match drive(&p, &thread, delay) {
                Drive::Completed => break,
                Drive::Killed => kills += 1,
                Drive::Ended => {}
            }
        }
        threads.push(thread);
    }
    assert!(kills >= want);
    verify(&p, &threads);
}

fn four_processes_claim_and_resume_concurrently_under_kill_9(store: &StoreKind) {
    let p = Arc::new(project(store, "torture4"));
    let want = kills_wanted();
    let threads: Arc<Mutex<Vec<String>>> =
        Arc::new(Mutex::new((0..6).map(|i| format!("01K{i:023}")).collect()));
    let kills = Arc::new(Mutex::new(0usize));
    let deadline = Instant::now() + Duration::from_secs(300);
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let p = p.clone();
            let threads = threads.clone();
            let kills = kills.clone();
            std::thread::spawn(move || {
                let mut rng = Rng(clock_seed() ^ (w as u64 + 1).wrapping_mul(0x9E37_79B9));
                loop {
                    let all: Vec<String> = threads.lock().expect("lock").clone();
                    if Instant::now() >= deadline {
                        // Say where each open thread is, so a failure can be understood.
                        let states: Vec<String> = all
                            .iter()
                            .filter(|t| status(&p, t).is_none_or(|s| s["status"] != "completed"))
                            .map(|t| {
                                let out = p.run(&["show", t]);
                                let holder = p.show_json(t)["holder"]["pid"].as_u64();
                                format!(
                                    "{t}: exit {:?}\n{}{}\nwhat drove it last:\n{}\nits holder's threads:\n{}",
                                    out.status.code(),
                                    stdout(&out),
                                    stderr(&out),
                                    drive_tail(&p, t, 40),
                                    holder.map(|pid| stacks_of(pid as u32)).unwrap_or_default()
                                )
                            })
                            .collect();
                        panic!("the threads do not finish:\n{}", states.join("\n"));
                    }
                    let open: Vec<&String> = all
                        .iter()
                        .filter(|t| status(&p, t).is_none_or(|s| s["status"] != "completed"))
                        .collect();
                    let killing = *kills.lock().expect("lock") < want;
                    if open.is_empty() {
                        if !killing {
                            break;
                        }
                        // More work to kill: a new thread.
                        let mut t = threads.lock().expect("lock");
                        let n = t.len();
                        t.push(format!("01K{n:023}"));
                        continue;
                    }
                    let t = open[rng.below(open.len())].clone();
                    let delay = (killing && rng.below(3) > 0)
                        .then(|| Duration::from_millis(5 + rng.millis(150)));
                    if drive(&p, &t, delay) == Drive::Killed {
                        *kills.lock().expect("lock") += 1;
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    assert!(*kills.lock().expect("lock") >= want);
    let threads = threads.lock().expect("lock").clone();
    verify(&p, &threads);
}

/// The variant whose effects are made by a grandchild: each step's command starts a
/// process in the background that makes the effect after a while, and waits for it.
const GRANDCHILD_STEPS: usize = 6;

fn grandchild_pipeline() -> String {
    let mut s = String::from("type Step {\n  v: int\n}\n\ninput seed: int\n\n");
    s.push_str("node s0(seed: int = input.seed) -> Step {\n  exec = [\"./step.sh\"]\n}\n\n");
    for i in 1..GRANDCHILD_STEPS {
        s.push_str(&format!(
            "node s{i}(prev: Step = s{}) -> Step {{\n  exec = [\"./step.sh\"]\n}}\n\n",
            i - 1
        ));
    }
    s.push_str(&format!("output last = s{}\n", GRANDCHILD_STEPS - 1));
    s
}

/// Adds one to `prev.v` (or the seed); the effect is a line in the log written by a
/// grandchild 0.3 to 0.8 s later, with the time it landed and the pid of the pipec whose
/// command started it (the command's parent).
const GRANDCHILD_STEP: &str = r#"#!/bin/sh
input=$(cat)
v=$(printf '%s' "$input" | sed -n 's/.*"prev":{"v":\([0-9]*\)}.*/\1/p')
[ -n "$v" ] || v=$(printf '%s' "$input" | sed -n 's/.*"seed":\([0-9]*\).*/\1/p')
ms=$(awk -v s="$$" 'BEGIN { srand(s); printf "%.3f", 0.3 + rand() * 0.5 }')
sh -c 'sleep "$1"; echo "$(date +%s%N) $2 $PIPEC_THREAD $PIPEC_NODE $PIPEC_CALL_KEY" >> effects.log' effect "$ms" "$PPID" &
wait
printf '{"v":%d}\n' $((v + 1))
"#;

/// How late after pipec's kill an effect may still land: the time the kernel and the
/// reaper take to kill the group on a loaded machine. A grandchild that outlives pipec
/// lands up to 0.8 s after it.
const KILL_TAKES: u128 = 200_000_000;

fn kill_9_when_the_effect_is_made_by_a_grandchild(store: &StoreKind) {
    let p = Project::on(store, "torturegrand");
    p.write("tort.pipe", &grandchild_pipeline());
    p.script("step.sh", GRANDCHILD_STEP);
    let out = p.run(&["check", "tort.pipe"]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let mut rng = Rng::from_clock();
    let want = (kills_wanted() / 3).max(10);
    let mut kills = 0;
    let mut threads = Vec::new();
    let mut lives = Vec::new();
    while kills < want || threads.len() < 2 {
        let thread = format!("01G{:023}", threads.len());
        let mut rounds = 0;
        loop {
            rounds += 1;
            assert!(rounds < 500, "thread {thread} does not finish");
            // Kills at random points of a step (each takes 0.3 to 0.8 s).
            let delay = (kills < want).then(|| Duration::from_millis(5 + rng.millis(900)));
            let (drive, life) = drive_recorded(&p, &thread, delay);
            lives.extend(life);
            match drive {
                Drive::Completed => break,
                Drive::Killed => kills += 1,
                Drive::Ended => {}
            }
        }
        threads.push(thread);
    }
    // Effects that were still on their way when a pipec ended land now, if ever.
    std::thread::sleep(Duration::from_secs(1));

    let log = p.read("effects.log");
    let mut per_node: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut keys: BTreeMap<(String, String), std::collections::BTreeSet<String>> = BTreeMap::new();
    for line in log.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [landed, pid, thread, node, key] = parts.as_slice() else {
            panic!("a malformed effect line: {line}");
        };
        let (landed, pid): (u128, u32) =
            (landed.parse().expect("a time"), pid.parse().expect("a pid"));
        // The pipec whose command started the effect: the last one with that pid that
        // started before the effect landed.
        let owner = lives
            .iter()
            .filter(|l| l.pid == pid && l.started_ns <= landed)
            .max_by_key(|l| l.started_ns)
            .unwrap_or_else(|| panic!("no pipec with pid {pid} started before {line}"));
        if let Some(killed) = owner.killed_ns {
            assert!(
                landed <= killed + KILL_TAKES,
                "{thread} {node}: the effect landed {} ms after its pipec was killed",
                (landed - killed) / 1_000_000
            );
        }
        *per_node
            .entry(((*thread).to_string(), (*node).to_string()))
            .or_default() += 1;
        keys.entry(((*thread).to_string(), (*node).to_string()))
            .or_default()
            .insert((*key).to_string());
    }
    // A retry (after a kill, by `--retry-unfinished`) saw the key its first try saw.
    for ((thread, node), seen) in &keys {
        assert_eq!(
            seen.len(),
            1,
            "{thread} {node}: every try carries one PIPEC_CALL_KEY, not {seen:?}"
        );
    }
    for thread in &threads {
        let st = status(&p, thread).unwrap_or_else(|| panic!("thread {thread} is readable"));
        assert_eq!(st["status"], "completed", "thread {thread}: {st}");
        assert_eq!(
            st["outputs"]["last"]["v"],
            100 + GRANDCHILD_STEPS as i64,
            "thread {thread} has the outputs of an uninterrupted run"
        );
        let retried = explicit_retries(&st);
        for i in 0..GRANDCHILD_STEPS {
            let node = format!("s{i}");
            let n = per_node
                .get(&(thread.clone(), node.clone()))
                .copied()
                .unwrap_or(0);
            let allowed = 1 + retried.get(&node).copied().unwrap_or(0);
            assert!(
                (1..=allowed).contains(&n),
                "thread {thread}, node {node}: the effect landed {n} times with {} explicit retries",
                allowed - 1
            );
        }
    }
    let out = p.run(&["store", "check"]);
    assert_eq!(code(&out), 0, "integrity check: {}", stderr(&out));
}

/// The variant whose effects are MCP tool calls: a chain of `act` nodes calling the
/// demo CRM server's `arm_expiry` (an effect, not idempotent, journaled) between `node`s
/// calling its read-only `get_deal`. The server is a child of each pipec attempt; a kill
/// takes it down too, and the server's call log (with the idempotency key of each call,
/// sent in `_meta`) counts the effects.
const MCP_STEPS: usize = 9;

fn mcp_pipeline(log: &std::path::Path) -> String {
    let mut s = format!(
        r#"server crm {{
  command = "pipec-demo-crm"
  env = {{ CRM_CALL_LOG: "{}" }}
}}

type Armed {{
  armed: int
}}

type Deal {{
  deal_id: string
}}

tool arm_expiry(count: int) -> Armed from crm {{
  destructive = false
}}

tool get_deal(deal_id: string) -> Deal from crm {{
  read_only = true
}}

input seed: int

act s0(seed: int = input.seed) -> Armed {{
  call = arm_expiry(count: seed)
}}

"#,
        log.display()
    );
    // Odd steps look the deal up (read-only, not journaled); even steps arm the expiry
    // again with the count the last even step armed, after the look-up between them.
    for i in 1..MCP_STEPS {
        if i % 2 == 1 {
            s.push_str(&format!(
                "node s{i}(prev: Armed = s{}) -> Deal {{\n  call = get_deal(deal_id: \"D1\")\n}}\n\n",
                i - 1
            ));
        } else {
            s.push_str(&format!(
                "act s{i}(prev: Armed = s{}, deal: Deal = s{}) -> Armed {{\n  call = arm_expiry(count: prev.armed)\n}}\n\n",
                i - 2,
                i - 1
            ));
        }
    }
    s.push_str(&format!("output last = s{}\n", MCP_STEPS - 1));
    s
}

/// The live processes whose environment holds `needle` (a path only this test uses).
fn processes_with_env(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        if environ
            .split(|b| *b == 0)
            .any(|var| String::from_utf8_lossy(var).contains(needle))
        {
            found.push(pid);
        }
    }
    found
}

fn kill_9_while_mcp_tool_calls_make_effects(store: &StoreKind) {
    let p = Project::on(store, "torturemcp");
    let log = p.dir.join("crm-calls.log");
    p.write("tort.pipe", &mcp_pipeline(&log));
    let out = p.run(&["check", "tort.pipe"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let mut rng = Rng::from_clock();
    let want = (kills_wanted() / 2).max(10);
    let mut kills = 0;
    let mut threads = Vec::new();
    while kills < want || threads.len() < 2 {
        let thread = format!("01M{:023}", threads.len());
        let mut rounds = 0;
        loop {
            rounds += 1;
            assert!(rounds < 500, "thread {thread} does not finish");
            let delay = (kills < want).then(|| Duration::from_millis(5 + rng.millis(150)));
            match drive(&p, &thread, delay) {
                Drive::Completed => break,
                Drive::Killed => kills += 1,
                Drive::Ended => {}
            }
        }
        threads.push(thread);
    }
    // The servers died with the pipec processes that started them.
    let deadline = Instant::now() + Duration::from_secs(5);
    let needle = log.display().to_string();
    while !processes_with_env(&needle).is_empty() {
        assert!(
            Instant::now() < deadline,
            "demo servers outlived their pipec: {:?}",
            processes_with_env(&needle)
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // The server saw each effect under the idempotency key of its call.
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    let mut per_key: HashMap<String, usize> = HashMap::new();
    for line in calls.lines().filter(|l| l.starts_with("tool arm_expiry ")) {
        let key = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("key="))
            .unwrap_or_else(|| panic!("an effect without its idempotency key: {line}"));
        *per_key.entry(key.to_string()).or_default() += 1;
    }
    let mut effects = 0;
    for thread in &threads {
        let st = status(&p, thread).unwrap_or_else(|| panic!("thread {thread} is readable"));
        assert_eq!(st["status"], "completed", "thread {thread}: {st}");
        assert_eq!(
            st["outputs"]["last"]["armed"], 100,
            "thread {thread} has the outputs of an uninterrupted run"
        );
        // Each effect call ran under its key at least once and at most once more per
        // explicit retry of it.
        let mut keys: HashMap<String, (String, usize)> = HashMap::new();
        for c in st["calls"].as_array().into_iter().flatten() {
            let shown = c["call"].as_str().unwrap_or("");
            let node = shown.split(':').next().unwrap_or("");
            let odd = node
                .trim_start_matches('s')
                .parse::<usize>()
                .is_ok_and(|i| i % 2 == 1);
            if odd {
                continue;
            }
            let key = c["record"]["idem_key"].as_str().unwrap_or("").to_string();
            let entry = keys.entry(node.to_string()).or_insert((key.clone(), 0));
            assert_eq!(
                entry.0, key,
                "thread {thread}: every try of {node} has one idempotency key"
            );
            if c["record"]["decision"] == "retry requested" {
                entry.1 += 1;
            }
        }
        assert_eq!(
            keys.len(),
            MCP_STEPS.div_ceil(2),
            "thread {thread}: {keys:?}"
        );
        for (node, (key, retries)) in &keys {
            let n = per_key.get(key).copied().unwrap_or(0);
            assert!(
                (1..=1 + retries).contains(&n),
                "thread {thread}, {node}: the effect reached the server {n} times with {retries} explicit retries"
            );
            effects += 1;
        }
    }
    assert_eq!(effects, threads.len() * MCP_STEPS.div_ceil(2));
    let out = p.run(&["store", "check"]);
    assert_eq!(code(&out), 0, "integrity check: {}", stderr(&out));
}

#[test]
fn kill_9_while_the_store_file_is_created_leaves_a_store_the_next_run_uses() {
    // The kill lands the moment the store's name appears: before, that was the moment
    // redb had begun the file, and a kill there left a file every later command refused.
    for round in 0..30 {
        let p = Project::new("torturecreate");
        p.write(
            "tiny.pipe",
            "input n: int\n\nnode a(n: int = input.n) -> int {\n  return = n\n}\n\noutput a = a\n",
        );
        let mut child = p
            .cmd(&["run", "tiny.pipe", "--input", "n=1", "-q"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let store = p.store();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !store.exists() && Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            std::hint::spin_loop();
        }
        kill(child);
        let out = p.run(&["run", "tiny.pipe", "--input", "n=2"]);
        assert_eq!(
            code(&out),
            0,
            "round {round}: the run after the kill: {}",
            stderr(&out)
        );
        let out = p.run(&["store", "check"]);
        assert_eq!(code(&out), 0, "round {round}: {}", stderr(&out));
        let leftovers: Vec<String> = std::fs::read_dir(p.dir.join(".pipec"))
            .expect("the store's folder")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("creating"))
            .collect();
        assert!(leftovers.is_empty(), "round {round}: {leftovers:?}");
    }
}

on_every_store!(
    kill_9_at_random_points_one_process_at_a_time,
    four_processes_claim_and_resume_concurrently_under_kill_9,
    kill_9_when_the_effect_is_made_by_a_grandchild,
    kill_9_while_mcp_tool_calls_make_effects,
);
