//! Durable costs on PostgreSQL, beside the embedded store.
//!
//! 1. **Per step**: a chain of 100 pure `return` nodes run to completion in this process,
//!    on a fresh redb file and on the PostgreSQL store, alternately; the time ÷ 100.
//! 2. **Throughput**: `pipec worker` processes (1, 2 and 4) on one database take short
//!    runs (a 5-node pipeline) that this process submits; durable steps per second from
//!    the first submit to the last completion, workers started and idle beforehand; then
//!    the same runs all submitted first, from the workers' start to the last completion
//!    (what the workers alone do, without the submitter beside them on the cores).
//! 3. **Listing at scale**: with 100,000 threads in the database (queued ones submitted
//!    through the store, the newest a few hundred completed runs), the wall time of the
//!    `pipec runs` (first page) and `pipec show` processes a person would type, and of the
//!    store calls under them.
//!
//! ```sh
//! cargo bench --bench postgres -- --url postgres://user@127.0.0.1:5432/db \
//!     [--quick] [--json FILE] [--threads 400] [--workers 1,2,4] [--worker-concurrency 8] [--listing-threads 100000]
//!     [--only steps|workers|listing]
//! ```
//!
//! The database at `--url` is taken over: its pipec tables are emptied before each
//! measurement. `bench/pg_compare.sh` makes a throwaway server and runs this beside
//! LangGraph's Postgres checkpointer. The workers are the `pipec` binary beside this
//! benchmark's profile (`target/release/pipec`), or `PIPEC_BIN`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pipec::runtime::{Outcome, RunOptions, Runner};
use pipec::store::{ListQuery, PgOpen, PostgresStore, RedbStore, Status, Store};
use serde_json::json;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn chain(n: usize) -> String {
    let mut s = String::from(
        "type Step {\n  v: int\n}\n\ninput x: int\n\nnode n0(x: int = input.x) -> Step {\n  return = { v: x }\n}\n\n",
    );
    for i in 1..n {
        s.push_str(&format!(
            "node n{i}(p: Step = n{}) -> Step {{\n  return = {{ v: p.v }}\n}}\n\n",
            i - 1
        ));
    }
    s.push_str(&format!("output last = n{}\n", n - 1));
    s
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// Empties the database's pipec tables (the schema stays).
fn empty(url: &str) {
    let out = Command::new("psql")
        .args([url, "-qAtc"])
        .arg(
            "DO $$ DECLARE t text; BEGIN FOR t IN SELECT tablename FROM pg_tables \
             WHERE schemaname = current_schema() AND tablename <> 'pipec_meta' LOOP \
             EXECUTE 'TRUNCATE ' || quote_ident(t) || ' CASCADE'; END LOOP; END $$;",
        )
        .output()
        .expect("psql");
    assert!(
        out.status.success(),
        "psql: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn pipec_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("PIPEC_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("exe");
    // target/<profile>/deps/postgres-HASH → target/<profile>/pipec
    exe.parent()
        .and_then(|d| d.parent())
        .map(|d| d.join("pipec"))
        .expect("target dir")
}

fn per_step(rt: &tokio::runtime::Runtime, url: &str, rounds: usize, out: &mut Vec<(String, f64)>) {
    let plan = pipec::compile_str("chain.pipe", &chain(100)).expect("plan");
    let dir = std::env::temp_dir().join(format!("pipec-pgbench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (mut redb, mut pg) = (Vec::new(), Vec::new());
    empty(url);
    let store = PostgresStore::connect(url, PgOpen::Create).expect("postgres store");
    for round in 0..rounds {
        let path = dir.join(format!("r{round}.redb"));
        let _ = std::fs::remove_file(&path);
        let file = RedbStore::open(&path).expect("redb");
        for (samples, store) in [
            (&mut redb, Arc::new(file) as Arc<dyn Store>),
            (&mut pg, Arc::new(store.clone()) as Arc<dyn Store>),
        ] {
            let runner = Runner::with_store(plan.clone(), store).project_root(&dir);
            // One warm-up run per store and round: connections, statements, pages.
            let _ = rt.block_on(runner.start(json!({ "x": 1 })));
            let t = Instant::now();
            let done = rt.block_on(runner.start(json!({ "x": 1 }))).expect("run");
            let took = t.elapsed().as_secs_f64() * 1000.0 / 100.0;
            assert!(matches!(done, Outcome::Completed { .. }), "{done:?}");
            samples.push(took);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let (r, p) = (median(redb), median(pg));
    println!("per step, 100-node chain: redb {r:.3} ms, postgres {p:.3} ms");
    out.push(("steps.redb.step_ms".into(), r));
    out.push(("steps.postgres.step_ms".into(), p));
}

/// Submits `count` threads (inputs 0, 1, ...) from `parts` tasks at once.
fn submit_all(rt: &tokio::runtime::Runtime, runner: &Arc<Runner>, count: usize, parts: usize) {
    rt.block_on(async {
        let mut tasks = Vec::new();
        for part in 0..parts {
            let runner = runner.clone();
            tasks.push(tokio::spawn(async move {
                for i in (part..count).step_by(parts) {
                    runner
                        .submit_with(json!({ "x": i }), RunOptions::default())
                        .await
                        .expect("submit");
                }
            }));
        }
        for t in tasks {
            t.await.expect("submitter");
        }
    });
}

fn completed(rt: &tokio::runtime::Runtime, store: &PostgresStore, want: usize) -> usize {
    let q = ListQuery {
        status: Some(Status::Completed),
        limit: want + 1,
        ..Default::default()
    };
    rt.block_on(store.list(q)).map(|l| l.len()).unwrap_or(0)
}

/// The machine's busy CPU time so far (every core, idle, I/O wait and steal left out),
/// in seconds; `None` off Linux.
fn busy_cpu_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let v: Vec<f64> = line
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal ...
    let busy = v.first()? + v.get(1)? + v.get(2)? + v.get(5)? + v.get(6)?;
    Some(busy / 100.0)
}

/// CPU seconds each process spent so far, by who it is: the `workers` (by pid),
/// `postgres` (the server and its backends), and this benchmark (the submits and the
/// waiting).
fn cpu_by_process(workers: &[u32]) -> std::collections::HashMap<u32, (String, f64)> {
    let mut out = std::collections::HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    let me = std::process::id();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ... utime stime are the 14th and 15th fields.
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let comm = head.split_once('(').map(|(_, c)| c).unwrap_or("");
        let who = if pid == me {
            "bench"
        } else if workers.contains(&pid) {
            "workers"
        } else if comm == "postgres" {
            "database"
        } else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        out.insert(pid, (who.to_string(), (ticks(11) + ticks(12)) / 100.0));
    }
    out
}

/// CPU ms per step of each kind of process between two [`cpu_by_process`] readings.
fn cpu_split(
    before: &std::collections::HashMap<u32, (String, f64)>,
    after: &std::collections::HashMap<u32, (String, f64)>,
    steps: usize,
) -> String {
    let mut by: std::collections::BTreeMap<&str, f64> = std::collections::BTreeMap::new();
    for (pid, (who, s)) in after {
        let was = before.get(pid).map(|(_, b)| *b).unwrap_or(0.0);
        *by.entry(who.as_str()).or_default() += s - was;
    }
    by.iter()
        .map(|(who, s)| format!("{who} {:.3}", s * 1000.0 / steps as f64))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How the runs reach the workers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Feed {
    /// Submitted while the workers wait (timed from the first submit).
    Live,
    /// All submitted before the workers start (timed from their start): what the workers
    /// alone do.
    Backlog,
}

fn throughput(
    rt: &tokio::runtime::Runtime,
    url: &str,
    workers: usize,
    threads: usize,
    concurrency: usize,
    feed: Feed,
) -> (f64, Duration, Option<f64>) {
    const NODES: usize = 5;
    empty(url);
    let store = PostgresStore::connect(url, PgOpen::Create).expect("postgres store");
    let plan = pipec::compile_str("short.pipe", &chain(NODES)).expect("plan");
    let runner = Arc::new(Runner::new(plan, store.clone()));
    if feed == Feed::Backlog {
        submit_all(rt, &runner, threads, 4);
    }
    let t = Instant::now();
    let mut procs: Vec<Child> = (0..workers)
        .map(|_| {
            Command::new(pipec_bin())
                .args([
                    "worker",
                    "--store",
                    url,
                    "--concurrency",
                    &concurrency.to_string(),
                    "--poll",
                    "5s",
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("pipec worker")
        })
        .collect();
    let mut t = t;
    let mut cpu = busy_cpu_s();
    let pids: Vec<u32> = procs.iter().map(Child::id).collect();
    let mut split = cpu_by_process(&pids);
    let mut submitted = Duration::ZERO;
    if feed == Feed::Live {
        // Started and waiting for work.
        std::thread::sleep(Duration::from_millis(1500));
        t = Instant::now();
        cpu = busy_cpu_s();
        split = cpu_by_process(&pids);
        submit_all(rt, &runner, threads, 4);
        submitted = t.elapsed();
    }
    let deadline = Instant::now() + Duration::from_secs(600);
    while completed(rt, &store, threads) < threads {
        assert!(Instant::now() < deadline, "the workers did not finish");
        // A look costs the database a page of rows: not so often that it is the load.
        std::thread::sleep(Duration::from_millis(40));
    }
    let took = t.elapsed();
    // Everything the machine did meanwhile (workers, database, submits, this loop), per
    // step: steadier than the rate on a machine shared with others.
    let cpu_ms = busy_cpu_s()
        .zip(cpu)
        .map(|(b, a)| (b - a) * 1000.0 / (threads * NODES) as f64);
    eprintln!(
        "  ({workers} worker(s): CPU ms a step: {})",
        cpu_split(&split, &cpu_by_process(&pids), threads * NODES)
    );
    // Each is a server process: what the workers opened to do this.
    let connections = Command::new("psql")
        .args([url, "-qAtc"])
        .arg(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND application_name = 'pipec'",
        )
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    eprintln!("  ({workers} worker(s): {connections} connections open at the end)");
    for p in &mut procs {
        let _ = Command::new("kill")
            .args(["-TERM", &p.id().to_string()])
            .status();
    }
    for p in &mut procs {
        let _ = p.wait();
    }
    if feed == Feed::Live {
        eprintln!(
            "  ({workers} worker(s): the {threads} submits took {:.0} ms of it)",
            submitted.as_secs_f64() * 1000.0
        );
    }
    ((threads * NODES) as f64 / took.as_secs_f64(), took, cpu_ms)
}

/// The median and 90th percentile of `rounds` wall times of `pipec ARGS --store URL`, ms.
fn command_ms(url: &str, args: &[&str], rounds: usize) -> (f64, f64) {
    let mut samples = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let out = Command::new(pipec_bin())
            .args(args)
            .args(["--store", url])
            .stdin(Stdio::null())
            .output()
            .expect("pipec");
        samples.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(
            out.status.success(),
            "pipec {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    let p90 = samples[(samples.len() * 9 / 10).min(samples.len() - 1)];
    (median(samples), p90)
}

/// The median wall time of `rounds` calls of `f`, ms.
fn call_ms<F: Fn() -> R, R>(rounds: usize, f: F) -> f64 {
    let mut samples = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        std::hint::black_box(f());
        samples.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    median(samples)
}

fn listing(rt: &tokio::runtime::Runtime, url: &str, threads: usize, out: &mut Vec<(String, f64)>) {
    const FINISHED: usize = 300;
    empty(url);
    let store = PostgresStore::connect(url, PgOpen::Create).expect("postgres store");
    let plan = pipec::compile_str("short.pipe", &chain(5)).expect("plan");
    let runner = Arc::new(Runner::new(plan, store.clone()));
    let t = Instant::now();
    let queued = threads.saturating_sub(FINISHED);
    submit_all(rt, &runner, queued, 16);
    let mut last = String::new();
    for i in 0..FINISHED.min(threads) {
        match rt.block_on(runner.start(json!({ "x": i }))).expect("run") {
            Outcome::Completed { thread, .. } => last = thread,
            other => panic!("{other:?}"),
        }
    }
    println!(
        "listing: {threads} threads written in {:.1} s ({queued} queued, {} completed)",
        t.elapsed().as_secs_f64(),
        FINISHED.min(threads)
    );
    let _ = Command::new("psql")
        .args([url, "-qAtc", "ANALYZE"])
        .output();
    let first_page = ListQuery {
        limit: 50,
        ..Default::default()
    };
    let lib_list = call_ms(50, || {
        rt.block_on(store.list(first_page.clone())).expect("list")
    });
    let lib_list_status = call_ms(50, || {
        rt.block_on(store.list(ListQuery {
            status: Some(Status::Completed),
            limit: 50,
            ..Default::default()
        }))
        .expect("list")
    });
    let lib_load = call_ms(50, || rt.block_on(store.load(&last)).expect("load"));
    let (runs, runs90) = command_ms(url, &["runs"], 30);
    let (runs_status, runs_status90) = command_ms(url, &["runs", "--status", "completed"], 30);
    let (show, show90) = command_ms(url, &["show", &last], 30);
    println!(
        "listing, {threads} threads: `pipec runs` {runs:.1} ms (p90 {runs90:.1}), `runs --status completed` {runs_status:.1} ms (p90 {runs_status90:.1}), `pipec show` {show:.1} ms (p90 {show90:.1}); in the library: first page {lib_list:.2} ms, by status {lib_list_status:.2} ms, load {lib_load:.2} ms"
    );
    out.push(("listing.threads".into(), threads as f64));
    out.push(("listing.runs_ms".into(), runs));
    out.push(("listing.runs_p90_ms".into(), runs90));
    out.push(("listing.runs_status_ms".into(), runs_status));
    out.push(("listing.show_ms".into(), show));
    out.push(("listing.show_p90_ms".into(), show90));
    out.push(("listing.lib_list_ms".into(), lib_list));
    out.push(("listing.lib_load_ms".into(), lib_load));
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    let Some(url) = arg(&args, "--url").or_else(|| std::env::var("PIPEC_BENCH_POSTGRES").ok())
    else {
        eprintln!(
            "error: no database: give --url postgres://... or PIPEC_BENCH_POSTGRES (bench/pg_compare.sh makes one)"
        );
        std::process::exit(2);
    };
    let quick = args.iter().any(|a| a == "--quick");
    let only = arg(&args, "--only");
    if let Some(o) = &only
        && !["steps", "workers", "listing"].contains(&o.as_str())
    {
        eprintln!("error: --only {o}: the parts are steps, workers and listing");
        std::process::exit(2);
    }
    let threads: usize = arg(&args, "--threads")
        .map(|t| t.parse().expect("--threads N"))
        .unwrap_or(if quick { 100 } else { 400 });
    let worker_counts: Vec<usize> = arg(&args, "--workers")
        .unwrap_or_else(|| "1,2,4".into())
        .split(',')
        .map(|n| n.trim().parse().expect("--workers 1,2,4"))
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut results: Vec<(String, f64)> = Vec::new();
    if only.as_deref().is_none_or(|o| o == "steps") {
        per_step(&rt, &url, if quick { 3 } else { 10 }, &mut results);
    }
    let worker_concurrency: usize = arg(&args, "--worker-concurrency")
        .map(|t| t.parse().expect("--worker-concurrency N"))
        .unwrap_or(8);
    let listing_threads: usize = arg(&args, "--listing-threads")
        .map(|t| t.parse().expect("--listing-threads N"))
        .unwrap_or(if quick { 10_000 } else { 100_000 });
    if only.as_deref().is_none_or(|o| o == "listing") {
        listing(&rt, &url, listing_threads, &mut results);
    }
    if only.as_deref().is_none_or(|o| o == "workers") {
        for (feed, key, how) in [
            (Feed::Live, "workers", "submitted meanwhile"),
            (Feed::Backlog, "backlog", "submitted before"),
        ] {
            for &w in &worker_counts {
                let (rate, took, cpu_ms) =
                    throughput(&rt, &url, w, threads, worker_concurrency, feed);
                println!(
                    "{w} worker(s): {threads} runs of 5 nodes ({how}) in {:.0} ms = {rate:.0} durable steps/s{}",
                    took.as_secs_f64() * 1000.0,
                    cpu_ms
                        .map(|c| format!(", {c:.3} CPU ms a step (whole machine)"))
                        .unwrap_or_default()
                );
                results.push((format!("{key}.{w}.steps_per_s"), rate));
                if let Some(c) = cpu_ms {
                    results.push((format!("{key}.{w}.cpu_ms_per_step"), c));
                }
            }
        }
    }
    if let Some(path) = arg(&args, "--json") {
        let doc: serde_json::Map<String, serde_json::Value> =
            results.into_iter().map(|(k, v)| (k, json!(v))).collect();
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&doc).unwrap_or_default(),
        )
        .expect("write --json");
    }
}
