//! Workers under `kill -9`: four `pipec worker` processes on one store run many threads
//! of a 20-node pipeline of effects while a killer ends a random worker with `kill -9`
//! and starts it again. Every thread must complete with the outputs of an uninterrupted
//! run; an effect that is not idempotent may run again only as often as a person
//! explicitly retried it (a thread whose effect was in flight when its worker died is
//! blocked until then, and the test acts as that person); no thread is left held.
//!
//! `PIPEC_WORKER_TORTURE_THREADS` (default 20, or 200 under `PIPEC_TEST_FULL=1`) and
//! `PIPEC_WORKER_TORTURE_KILLS` (default 4, or 24) set the size.

#![cfg(target_os = "linux")]

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::rng::Rng;
use common::*;

use super::torture::{STEP, STEPS, expected, pipeline};

fn is_idempotent(node: &str) -> bool {
    node.trim_start_matches('s')
        .parse::<usize>()
        .is_ok_and(|i| i % 4 == 2)
}

/// What the test runs against: a store path or URL, given to every command.
pub struct Target<'a> {
    pub p: &'a Project,
    pub store: String,
    /// How long a lease lives (`PIPEC_LEASE_TTL_MS`) where leases expire (PostgreSQL).
    pub lease_ttl_ms: Option<u64>,
}

impl Target<'_> {
    fn cmd(&self, args: &[&str]) -> std::process::Command {
        let mut c = self.p.cmd(args);
        if let Some(ttl) = self.lease_ttl_ms {
            c.env("PIPEC_LEASE_TTL_MS", ttl.to_string());
        }
        c
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        let mut all: Vec<&str> = args.to_vec();
        all.extend_from_slice(&["--store", &self.store]);
        self.cmd(&all)
            .stdin(Stdio::null())
            .output()
            .expect("pipec runs")
    }

    fn worker(&self, n: usize, extra: &[&str]) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.p.dir.join(format!("worker-{n}.log")))
            .expect("log");
        let mut args = vec![
            "worker",
            "--store",
            &self.store,
            "--verbose",
            "--poll",
            "300ms",
            "--concurrency",
            "4",
        ];
        args.extend_from_slice(extra);
        self.cmd(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("pipec worker starts")
    }

    fn status(&self, thread: &str) -> serde_json::Value {
        let out = self.run(&["show", thread, "--json", "--internal"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        json(&stdout(&out))
    }

    /// How many threads are in each status.
    fn counts(&self) -> BTreeMap<String, usize> {
        let out = self.run(&["runs", "--json", "--limit", "100000"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let mut counts = BTreeMap::new();
        for t in json(&stdout(&out)).as_array().into_iter().flatten() {
            let s = if t["stale"] == true {
                "stale".to_string()
            } else {
                t["status"].as_str().unwrap_or("").to_string()
            };
            *counts.entry(s).or_default() += 1;
        }
        counts
    }

    /// The pids of the processes that hold running threads.
    fn holders(&self) -> Vec<u32> {
        self.list("running")
            .iter()
            .filter_map(|t| t["holder"]["pid"].as_u64())
            .map(|p| p as u32)
            .collect()
    }

    fn list(&self, status: &str) -> Vec<serde_json::Value> {
        let out = self.run(&["runs", "--json", "--limit", "100000", "--status", status]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        json(&stdout(&out)).as_array().cloned().unwrap_or_default()
    }
}

/// Waits until `pid` has its SIGTERM handler (`SigCgt` in `/proc/<pid>/status`): a worker
/// started again a moment ago, near the end of a run, may not have it yet, and SIGTERM
/// would then end it as it ends any process.
fn wait_catches_sigterm(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let caught = status
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
            .is_some_and(|mask| mask & (1 << (libc::SIGTERM - 1)) != 0);
        if caught || Instant::now() > deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn signal(pid: u32, sig: &str) {
    let _ = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status();
}

/// Runs the torture against `t`; `stop_one` also stops one worker with SIGSTOP for
/// `stop_for` and continues it (a store whose leases expire fences its late writes).
/// One torture at a time: each is four workers' worth of load on this machine.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Returns the worker that was stopped, if one was.
pub fn torture(t: &Target, stop_for: Option<Duration>) -> Option<usize> {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let threads_wanted = tier_size("PIPEC_WORKER_TORTURE_THREADS", 20, 200);
    let kills_wanted = tier_size("PIPEC_WORKER_TORTURE_KILLS", 4, 24);
    let out = t.p.run(&["check", "tort.pipe"]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    // The first submit creates the store.
    let mut threads = Vec::new();
    for i in 0..threads_wanted {
        let seed = format!("seed={}", 100 + i);
        let out = t.run(&["run", "tort.pipe", "--submit", "-q", "--input", &seed]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        threads.push((stdout(&out).trim().to_string(), 100 + i as i64));
    }
    let mut rng = Rng::from_clock();
    let mut workers: Vec<Child> = (0..4).map(|n| t.worker(n, &[])).collect();
    let mut kills = 0;
    let mut stopped = stop_for.is_none();
    let mut stopped_worker = None;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let counts = t.counts();
        let done = counts.get("completed").copied().unwrap_or(0);
        if done == threads.len() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the threads do not finish: {counts:?}"
        );
        // A thread whose non-idempotent effect was in flight waits for a person: retry it.
        if counts.contains_key("blocked") {
            for b in t.list("blocked") {
                let id = b["id"].as_str().unwrap_or("");
                let _ = t.run(&["resume", id, "--retry-unfinished", "all", "-q"]);
            }
        }
        std::thread::sleep(Duration::from_millis(50 + rng.millis(250)));
        // One worker that holds threads, stopped past its leases' expiry, then continued:
        // the others take its threads over meanwhile. It comes right after the first kill,
        // so that a small run (the default tier, whose steps take milliseconds) still has
        // threads left to stop it on, and the other kills fall around it.
        let holder = (!stopped && kills >= 1)
            .then(|| {
                let holding = t.holders();
                (0..workers.len()).find(|w| holding.contains(&workers[*w].id()))
            })
            .flatten();
        if let Some(w) = holder {
            signal(workers[w].id(), "-STOP");
            std::thread::sleep(stop_for.unwrap_or_default());
            signal(workers[w].id(), "-CONT");
            stopped_worker = Some(w);
            stopped = true;
        } else if kills < kills_wanted {
            let w = rng.below(workers.len());
            let _ = workers[w].kill();
            let _ = workers[w].wait();
            kills += 1;
            workers[w] = t.worker(w, &[]);
        }
    }
    assert!(kills > 0, "the workers were killed while they worked");
    assert!(stopped, "a worker was stopped while it held threads");
    for w in &workers {
        wait_catches_sigterm(w.id());
        signal(w.id(), "-TERM");
    }
    for mut w in workers {
        let code = w.wait().expect("wait").code();
        assert_eq!(code, Some(0), "a worker stops cleanly on SIGTERM");
    }
    verify(t, &threads);
    // No lease is left: nothing is running or held.
    let counts = t.counts();
    assert_eq!(
        counts.get("completed").copied().unwrap_or(0),
        threads.len(),
        "{counts:?}"
    );
    let runs = stdout(&t.run(&["runs", "--limit", "100000"]));
    assert!(
        !runs.contains("running") && !runs.contains("@"),
        "no holder left:\n{runs}"
    );
    eprintln!(
        "{} threads of {STEPS} nodes, {kills} kills, 4 workers: every thread completed",
        threads.len()
    );
    stopped_worker
}

fn verify(t: &Target, threads: &[(String, i64)]) {
    let log = t.p.read("effects.log");
    let mut per_node: HashMap<(String, String), usize> = HashMap::new();
    for line in log.lines() {
        if let [thread, node, _key] = line.split_whitespace().collect::<Vec<_>>().as_slice() {
            *per_node
                .entry(((*thread).to_string(), (*node).to_string()))
                .or_default() += 1;
        }
    }
    for (thread, seed) in threads {
        let st = t.status(thread);
        assert_eq!(st["status"], "completed", "thread {thread}: {st}");
        assert_eq!(
            st["outputs"]["last"]["v"],
            expected(*seed),
            "thread {thread} has the outputs of an uninterrupted run"
        );
        let calls = st["calls"].as_array().cloned().unwrap_or_default();
        for i in 0..STEPS {
            let node = format!("s{i}");
            if i % 4 == 1 && i != 0 {
                continue;
            }
            let n = per_node
                .get(&(thread.clone(), node.clone()))
                .copied()
                .unwrap_or(0);
            assert!(n >= 1, "thread {thread}: the effect of {node} ran");
            if is_idempotent(&node) {
                continue;
            }
            let retries = calls
                .iter()
                .filter(|c| {
                    c["record"]["decision"] == "retry requested"
                        && c["call"].as_str().unwrap_or("").split(':').next() == Some(node.as_str())
                })
                .count();
            assert!(
                n <= 1 + retries,
                "thread {thread}, node {node}: the effect ran {n} times with {retries} explicit retries"
            );
        }
    }
}

#[test]
fn four_workers_under_kill_9_complete_every_thread_without_repeating_an_effect() {
    let p = Project::new("wtorture");
    p.write("tort.pipe", &pipeline());
    p.script("step.sh", STEP);
    let store = p.store().display().to_string();
    torture(
        &Target {
            p: &p,
            store,
            lease_ttl_ms: None,
        },
        None,
    );
}

/// The same on PostgreSQL, where a lease is a row that expires: leases live 1.5 s, and one
/// worker is stopped with SIGSTOP for 4 s, past the expiry of every lease it holds, then
/// continued. Its threads are taken over meanwhile; what it writes when it wakes is
/// fenced, so the verification (outputs, effects counted by the effect, no holder left)
/// holds as on redb.
#[test]
fn on_postgres_four_workers_under_kill_9_and_a_stopped_worker_complete_every_thread() {
    let Some(store) = common::pg_schema::postgres_store("wtorture") else {
        return;
    };
    let p = Project::new("wtorture-pg");
    p.write("tort.pipe", &pipeline());
    p.script("step.sh", STEP);
    let t = Target {
        p: &p,
        store,
        lease_ttl_ms: Some(1500),
    };
    let stopped = torture(&t, Some(Duration::from_secs(4))).expect("a worker was stopped");
    // What the stopped worker tried to write when it woke was refused: its lease had
    // been taken over (R0405), and the verification above shows nothing of it landed.
    let log = p.read(&format!("worker-{stopped}.log"));
    let fenced: Vec<&str> = log.lines().filter(|l| l.contains("R0405")).collect();
    eprintln!(
        "the stopped worker's fenced writes: {}\n{}",
        fenced.len(),
        fenced.join("\n")
    );
    assert!(
        !fenced.is_empty(),
        "the stopped worker's late writes were fenced:\n{log}"
    );
}
