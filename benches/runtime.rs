//! Durable-run costs, measured on a real store file: chains of 100 pure `return` nodes,
//! of 100 in-process `host` effects and of 100 `exec` effects (per step), scrubbing a
//! 1 MiB result of secrets (with escapes to decode, and plain), one store commit, store
//! bytes (100 vs 200 nodes), a 3-node pipeline with a gate (pause, warm resume), cold
//! start to the gate and cold resume to completion in fresh processes, and `pipec runs`
//! over a store of 100,000 threads.
//!
//! Per-step figures are means over a sequence (a chain's time ÷ 100); the references they
//! are compared with (a store commit, the subprocess alone) are measured the same way, as
//! sequences of 100, so that a difference of two figures compares like with like. Each
//! row's median is over repeated sequences.
//!
//! `cargo bench --bench runtime` prints a table; `-- --json FILE` also writes the figures
//! (the side-by-side script `bench/compare.sh` reads them); `-- --quick` repeats less;
//! `-- --skip-list` leaves out `pipec runs` over 100,000 threads (about a minute).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pipec::runtime::{Outcome, Runner};
use pipec::store::{RedbStore, Store};
use serde_json::{Value, json};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn p95(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((v.len() as f64) * 0.95).ceil() as usize;
    v.get(i.saturating_sub(1).min(v.len().saturating_sub(1)))
        .copied()
        .unwrap_or(f64::NAN)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

struct Bench {
    dir: PathBuf,
    rt: tokio::runtime::Runtime,
    results: Vec<(String, String, usize, f64, f64)>,
}

impl Bench {
    fn record(&mut self, id: &str, unit: &str, values: Vec<f64>) {
        let n = values.len();
        let (m, p) = (median(values.clone()), p95(values));
        println!("{id:<34} {unit:>5} {n:>4} {m:>12.3} {p:>12.3}");
        self.results.push((id.into(), unit.into(), n, m, p));
    }

    fn fresh(&self, name: &str) -> PathBuf {
        let p = self.dir.join(name);
        let _ = std::fs::remove_file(&p);
        let _ = std::fs::remove_dir_all(pipec::store::lock::locks_dir(&p));
        p
    }
}

fn chain(n: usize, exec: bool) -> String {
    chain_of(n, exec, false)
}

fn chain_of(n: usize, exec: bool, host: bool) -> String {
    // `doc` is an input the chain carries and never reads after the start.
    let mut s = String::from(
        "type Step {\n  v: int\n}\n\ninput x: int\ninput doc: string = \"\"\n\nnode n0(x: int = input.x, doc: string = input.doc) -> Step {\n  return = { v: x }\n}\n\n",
    );
    for i in 1..n {
        if exec {
            s.push_str(&format!(
                "node n{i}(p: Step = n{}) -> Step {{\n  exec = [\"./noop.sh\"]\n}}\n\n",
                i - 1
            ));
        } else if host {
            s.push_str(&format!(
                "node n{i}(p: Step = n{}) -> Step {{\n  host = \"pass\"\n}}\n\n",
                i - 1
            ));
        } else {
            s.push_str(&format!(
                "node n{i}(p: Step = n{}) -> Step {{\n  return = {{ v: p.v }}\n}}\n\n",
                i - 1
            ));
        }
    }
    s.push_str(&format!("output last = n{}\n", n - 1));
    s
}

const GATE3: &str = "type Step {\n  v: int\n}\n\ninput x: int\n\nnode prepare(x: int = input.x) -> Step {\n  return = { v: x }\n}\n\ngate approve(s: Step = prepare) -> bool {\n  message = \"Go on with {{ s.v }}?\"\n}\n\nnode finish(ok: bool = approve, s: Step = prepare) -> Step {\n  when = ok\n  return = { v: s.v }\n}\n\noutput result: Step? = finish\n";

const NOOP: &str = "#!/bin/sh\ncat > /dev/null\necho '{\"v\":1}'\n";

/// Minor page faults of this process so far (Linux; 0 elsewhere). Forking a child
/// write-protects the parent's pages, so after each `exec` the runtime pays a fault for
/// every page it writes; this shows how many.
fn minor_faults() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            // Fields after the command name, which ends with the last `)`: the 10th
            // field of the line (minflt) is the 8th of these.
            let rest = s.rsplit_once(')')?.1.to_string();
            rest.split_whitespace().nth(7)?.parse::<f64>().ok()
        })
        .unwrap_or(0.0)
}

/// `n` runs of the no-op command as an `exec` step starts it, one after the other; the
/// time per run.
fn exec_alone(b: &Bench, n: usize) -> f64 {
    let stdin = json!({ "p": { "v": 1 } });
    let start = Instant::now();
    b.rt.block_on(async {
        for _ in 0..n {
            let out = pipec::runtime::exec::run(pipec::runtime::exec::ExecRequest {
                argv: &["./noop.sh".to_string()],
                project_root: &b.dir,
                stdin: &stdin,
                env: Vec::new(),
                timeout: None,
            })
            .await;
            assert!(out.is_ok());
        }
    });
    ms(start.elapsed()) / n as f64
}

fn plan(name: &str, text: &str) -> pipec::Plan {
    pipec::compile_str(name, text).unwrap_or_else(|e| panic!("{e}"))
}

fn run_chain(b: &mut Bench, n: usize, exec: bool, store_path: &Path) -> Duration {
    let store = RedbStore::open(store_path).expect("store");
    let runner = Runner::new(plan("chain.pipe", &chain(n, exec)), store).project_root(&b.dir);
    let start = Instant::now();
    let out =
        b.rt.block_on(runner.start(json!({ "x": 1 })))
            .expect("runs");
    let took = start.elapsed();
    assert!(matches!(out, Outcome::Completed { .. }), "{out:?}");
    took
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    // `bench/compare.sh` leaves out what the peer has no counterpart for.
    let skip_list = args.iter().any(|a| a == "--skip-list");
    let json_out = args
        .iter()
        .position(|a| a == "--json")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from);
    let reps = if quick { 4 } else { 20 };
    let dir = std::env::var_os("BENCH_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("pipec-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("bench dir");
    std::fs::write(dir.join("noop.sh"), NOOP).expect("script");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ =
            std::fs::set_permissions(dir.join("noop.sh"), std::fs::Permissions::from_mode(0o755));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut b = Bench {
        dir: dir.clone(),
        rt,
        results: Vec::new(),
    };
    println!(
        "{:<34} {:>5} {:>4} {:>12} {:>12}",
        "measurement", "unit", "n", "median", "p95"
    );

    // Scrubbing a 1 MiB tool result with five secrets: a JSON text with escapes in every
    // string (so the decoded views are built), one secret in it three ways, and a plain
    // text of the same size (one view).
    {
        let mut scrubber = pipec::runtime::secrets::Scrubber::default();
        for (i, value) in [
            "sk-live-0000aaaa1111bbbb",
            "pa&ss<word>-2222",
            "ghp_3333cccc4444dddd5555",
            "Bearer kb-6666eeee",
            "wörd/🔑-7777",
        ]
        .iter()
        .enumerate()
        {
            scrubber.add(&format!("S{i}"), value);
        }
        let mut escaped = String::from("{\"items\":[");
        let mut plain = String::new();
        let mut i = 0;
        while escaped.len() < 1 << 20 {
            escaped.push_str(&format!(
                "{{\"id\":{i},\"note\":\"line \\\"{i}\\\" caf\\u00e9 \\/ path%2F{i}\"}},"
            ));
            plain.push_str(&format!("row {i} of a plain result, nothing to see here\n"));
            i += 1;
        }
        escaped
            .push_str("\"pa\\u0026ss\\u003cword\\u003e-2222 c2stbGl2ZS0wMDAwYWFhYTExMTFiYmJi\"]}");
        let mut times = Vec::new();
        for _ in 0..reps {
            let start = Instant::now();
            let out = scrubber.scrub(&escaped);
            times.push(ms(start.elapsed()));
            assert!(out.contains("secret(S1)") && out.contains("secret(S0)"));
        }
        b.record("scrub.escaped_1mib_ms", "ms", times);
        let mut times = Vec::new();
        for _ in 0..reps {
            let start = Instant::now();
            let _ = scrubber.scrub(&plain);
            times.push(ms(start.elapsed()));
        }
        b.record("scrub.plain_1mib_ms", "ms", times);
    }

    // One durable commit of one small row, through the store (channel, fenced txn).
    {
        let path = b.fresh("commit.redb");
        let store = RedbStore::open(&path).expect("store");
        let runner = Runner::new(plan("c.pipe", GATE3), store.clone());
        let _ = b.rt.block_on(runner.start(json!({ "x": 1 })));
        let thread = b.rt.block_on(store.list(Default::default())).expect("list")[0]
            .id
            .clone();
        let (lease, _, _) =
            b.rt.block_on(store.claim(
                &thread,
                pipec::store::AttemptRec {
                    number: 0,
                    run_id: "bench".into(),
                    pid: 0,
                    host: "h".into(),
                    started_ms: 0,
                    ended_ms: 0,
                    end: None,
                    plan_hash: String::new(),
                    pipec: String::new(),
                },
            ))
            .expect("claim");
        let row = |i: usize| {
            vec![pipec::store::Write::Node(
                format!("n{i}"),
                pipec::store::NodeRec::done(json!({ "v": i })),
            )]
        };
        // Single commits: their spread.
        let mut times = Vec::new();
        for i in 0..200 {
            let start = Instant::now();
            b.rt.block_on(store.commit(&lease, row(i))).expect("commit");
            times.push(ms(start.elapsed()));
        }
        b.record("commit.single_ms", "ms", times);
        // Sequences of 100 commits, per commit: the same statistic as a chain's step.
        let mut times = Vec::new();
        for _ in 0..reps {
            let start = Instant::now();
            b.rt.block_on(async {
                for i in 0..100 {
                    store.commit(&lease, row(i)).await.expect("commit");
                }
            });
            times.push(ms(start.elapsed()) / 100.0);
        }
        b.record("commit_ms", "ms", times);
    }

    // Chains of 100: pure steps share commits; effects commit once per step.
    for (id, exec) in [
        ("chain100.return.step_ms", false),
        ("chain100.exec.step_ms", true),
    ] {
        let mut times = Vec::new();
        let mut faults = Vec::new();
        // For `exec`, each chain is paired with 100 runs of the subprocess alone, in
        // alternating order, so that the durable cost (their difference) is taken from
        // neighbouring measurements rather than from two far apart.
        let mut durable = Vec::new();
        for r in 0..reps + 2 {
            let path = b.fresh(&format!("chain-{r}.redb"));
            let alone_first = exec && r % 2 == 1;
            let alone_before = alone_first.then(|| exec_alone(&b, 100));
            let before = minor_faults();
            let t = run_chain(&mut b, 100, exec, &path);
            let after = minor_faults();
            let alone = match alone_before {
                Some(a) => Some(a),
                None if exec => Some(exec_alone(&b, 100)),
                None => None,
            };
            if r >= 2 {
                times.push(ms(t) / 100.0);
                faults.push((after - before) / 100.0);
                if let Some(a) = alone {
                    durable.push(ms(t) / 100.0 - a);
                }
            }
        }
        b.record(id, "ms", times);
        if exec {
            b.record("chain100.exec.minor_faults", "n", faults);
            b.record("exec.durable_ms", "ms", durable);
        }
    }

    // An in-process effect that costs nothing: what is left is the runtime and its commit.
    // The same with a 1 MB input on the thread: a step's commit must not cost more.
    for (id, doc) in [
        ("chain100.host.step_ms", String::new()),
        ("chain100.host_1mb_input.step_ms", "y".repeat(1 << 20)),
    ] {
        let mut times = Vec::new();
        let mut faults = Vec::new();
        for r in 0..reps + 2 {
            let path = b.fresh(&format!("host-{r}.redb"));
            let store = RedbStore::open(&path).expect("store");
            let runner = Runner::new(plan("host.pipe", &chain_of(100, false, true)), store)
                .host_fn_json("pass", |v: Value| async move { Ok(v["p"].clone()) });
            let before = minor_faults();
            let start = Instant::now();
            let out =
                b.rt.block_on(runner.start(json!({ "x": 1, "doc": doc })))
                    .expect("runs");
            assert!(matches!(out, Outcome::Completed { .. }), "{out:?}");
            if r >= 2 {
                times.push(ms(start.elapsed()) / 100.0);
                faults.push((minor_faults() - before) / 100.0);
            }
        }
        b.record(id, "ms", times);
        if doc.is_empty() {
            b.record("chain100.host.minor_faults", "n", faults);
        }
    }

    // The cost of the subprocess alone, to separate the durable cost of an effect: 100
    // in a row, per run, as a chain's step is measured.
    {
        let mut times = Vec::new();
        for _ in 0..reps {
            let start = Instant::now();
            for _ in 0..100 {
                let out = Command::new(dir.join("noop.sh"))
                    .stdin(std::process::Stdio::null())
                    .output()
                    .expect("spawn");
                assert!(out.status.success());
            }
            times.push(ms(start.elapsed()) / 100.0);
        }
        b.record("exec.spawn_ms", "ms", times);
    }

    // The same spawn as an `exec` step makes it (tokio, pipes, process group, stdin).
    {
        let mut times = Vec::new();
        let mut faults = Vec::new();
        for _ in 0..reps {
            let before = minor_faults();
            times.push(exec_alone(&b, 100));
            faults.push((minor_faults() - before) / 100.0);
        }
        b.record("exec.run_ms", "ms", times);
        b.record("exec.run.minor_faults", "n", faults);
    }

    // Store bytes. `file_bytes`: the file of a fresh store after one run (redb's fixed
    // allocation included). `run_bytes`: the pages one more run adds to a store that holds
    // runs already (the steady-state cost of a run). `payload_bytes`: the keys and values
    // of the run's own rows (the shared plan and the store's metadata excluded).
    for exec in [false, true] {
        let kind = if exec { "exec" } else { "return" };
        for n in [100, 200] {
            let path = b.fresh(&format!("bytes-{kind}-{n}.redb"));
            run_chain(&mut b, n, exec, &path);
            let file = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0) as f64;
            let stats = RedbStore::stats_at(&path).expect("stats");
            let payload: u64 = stats
                .tables
                .iter()
                .filter(|t| !matches!(t.name, "meta" | "plans"))
                .map(|t| t.stored_bytes)
                .sum();
            let store = RedbStore::open(&path).expect("store");
            let runner = Runner::new(plan("chain.pipe", &chain(n, exec)), store.clone())
                .project_root(&b.dir);
            for _ in 0..3 {
                b.rt.block_on(runner.start(json!({ "x": 1 })))
                    .expect("runs");
            }
            let runs = if quick { 4 } else { 10 };
            let before = store.stats().expect("stats").allocated_bytes;
            for _ in 0..runs {
                b.rt.block_on(runner.start(json!({ "x": 1 })))
                    .expect("runs");
            }
            let after = store.stats().expect("stats").allocated_bytes;
            let per_run = after.saturating_sub(before) as f64 / runs as f64;
            b.record(&format!("chain{n}.{kind}.file_bytes"), "bytes", vec![file]);
            b.record(
                &format!("chain{n}.{kind}.run_bytes"),
                "bytes",
                vec![per_run],
            );
            b.record(
                &format!("chain{n}.{kind}.payload_bytes"),
                "bytes",
                vec![payload as f64],
            );
        }
    }

    // A gate: pause and warm resume in one process.
    {
        let path = b.fresh("gate.redb");
        let store = RedbStore::open(&path).expect("store");
        let runner = Arc::new(Runner::new(plan("gate3.pipe", GATE3), store));
        let (mut pause, mut resume) = (Vec::new(), Vec::new());
        for r in 0..(if quick { 10 } else { 50 }) + 2 {
            let start = Instant::now();
            let out =
                b.rt.block_on(runner.start(json!({ "x": r })))
                    .expect("start");
            let p = ms(start.elapsed());
            let Outcome::Paused { thread, .. } = out else {
                panic!("{out:?}")
            };
            let start = Instant::now();
            let out =
                b.rt.block_on(runner.resume(&thread, vec![("approve".into(), json!(true))]))
                    .expect("resume");
            let q = ms(start.elapsed());
            assert!(matches!(out, Outcome::Completed { .. }));
            if r >= 2 {
                pause.push(p);
                resume.push(q);
            }
        }
        b.record("gate.pause_ms", "ms", pause);
        b.record("gate.resume_warm_ms", "ms", resume);
    }

    // Fresh processes: cold start to the gate, cold resume to completion.
    {
        let bin = env!("CARGO_BIN_EXE_pipec");
        std::fs::write(dir.join("gate3.pipe"), GATE3).expect("write");
        let store = b.fresh("cold.redb");
        let store_s = store.display().to_string();
        let (mut cold, mut threads) = (Vec::new(), Vec::new());
        for _ in 0..(if quick { 4 } else { 10 }) {
            let start = Instant::now();
            let out = Command::new(bin)
                .args([
                    "run",
                    "gate3.pipe",
                    "--input",
                    "x=1",
                    "--store",
                    &store_s,
                    "-q",
                ])
                .current_dir(&dir)
                .output()
                .expect("run");
            cold.push(ms(start.elapsed()));
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let thread = text
                .split_whitespace()
                .find(|w| w.len() == 26)
                .expect("paused with a thread id")
                .to_string();
            threads.push(thread);
        }
        b.record("cold_to_gate_wall_ms", "ms", cold);
        let mut resume = Vec::new();
        for t in &threads {
            let start = Instant::now();
            let out = Command::new(bin)
                .args([
                    "resume",
                    t,
                    "--answer",
                    "approve=true",
                    "--store",
                    &store_s,
                    "-q",
                ])
                .current_dir(&dir)
                .output()
                .expect("resume");
            resume.push(ms(start.elapsed()));
            let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
            assert_eq!(
                v["result"]["v"],
                1,
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        b.record("cold_resume_wall_ms", "ms", resume);
    }

    // `pipec runs` over a store of many threads: the first page, a page by status, a page
    // deep in the list (by cursor), and the command in a fresh process.
    if !skip_list {
        let threads = if quick { 10_000 } else { 100_000 };
        let path = b.fresh("many.redb");
        let store = RedbStore::open(&path).expect("store");
        let start = Instant::now();
        b.rt.block_on(fill(&store, threads));
        let filled = start.elapsed();
        println!(
            "  ({threads} threads created in {:.1} s)",
            filled.as_secs_f64()
        );
        let page = |q: pipec::store::ListQuery| {
            let mut times = Vec::new();
            for _ in 0..50 {
                let t = Instant::now();
                let rows = b.rt.block_on(store.list(q.clone())).expect("list");
                assert_eq!(rows.len(), 50);
                times.push(ms(t.elapsed()));
            }
            times
        };
        let first = page(pipec::store::ListQuery {
            limit: 50,
            ..Default::default()
        });
        let paused = page(pipec::store::ListQuery {
            limit: 50,
            status: Some(pipec::store::Status::Paused),
            ..Default::default()
        });
        // The cursor of a page half-way down the list.
        let all =
            b.rt.block_on(store.list(pipec::store::ListQuery {
                limit: threads / 2,
                ..Default::default()
            }))
            .expect("list");
        let cursor = all.last().map(|t| t.id.clone());
        let deep = page(pipec::store::ListQuery {
            limit: 50,
            before: cursor,
            ..Default::default()
        });
        b.record(&format!("runs{threads}.first_page_ms"), "ms", first);
        b.record(&format!("runs{threads}.status_page_ms"), "ms", paused);
        b.record(&format!("runs{threads}.deep_page_ms"), "ms", deep);
        drop(store);
        let bin = env!("CARGO_BIN_EXE_pipec");
        let store_s = path.display().to_string();
        let mut cold = Vec::new();
        for _ in 0..10 {
            let t = Instant::now();
            let out = Command::new(bin)
                .args(["runs", "--store", &store_s, "--limit", "50"])
                .output()
                .expect("runs");
            assert!(out.status.success());
            cold.push(ms(t.elapsed()));
        }
        b.record(&format!("runs{threads}.cli_cold_ms"), "ms", cold);
    }

    if let Some(path) = json_out {
        let doc: Vec<Value> = b.results.iter().map(|(id, unit, n, m, p)| json!({ "id": id, "unit": unit, "n": n, "median": m, "p95": p })).collect();
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&doc).unwrap_or_default(),
        )
        .expect("write results");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Creates `n` threads (one in ten paused, the rest completed) through the store's own
/// operations, many at a time so that their commits share transactions.
async fn fill(store: &RedbStore, n: usize) {
    use pipec::store::{AttemptRec, Status, ThreadRec, Write};
    let mut done = 0;
    while done < n {
        let batch = (n - done).min(512);
        let mut set = tokio::task::JoinSet::new();
        for k in 0..batch {
            let store = store.clone();
            let i = done + k;
            set.spawn(async move {
                let now = pipec::store::ids::now_ms();
                let mut rec = ThreadRec {
                    id: pipec::store::ids::new_thread_id(),
                    pipeline: "bench".into(),
                    plan_hash: "sha256:0".into(),
                    source: "bench.pipe".into(),
                    project_root: ".".into(),
                    status: Status::Running,
                    cancel_requested: false,
                    epoch: 1,
                    holder: None,
                    created_ms: now,
                    updated_ms: now,
                    inputs: json!({ "x": i }),
                    config: Default::default(),
                    model_overrides: Default::default(),
                    pre_answers: Default::default(),
                    outputs: None,
                    error: None,
                    next_seq: 0,
                    attempts: 1,
                    due_ms: None,
                };
                let attempt = AttemptRec {
                    number: 1,
                    run_id: "bench".into(),
                    pid: 0,
                    host: "h".into(),
                    started_ms: now,
                    ended_ms: 0,
                    end: None,
                    plan_hash: "sha256:0".into(),
                    pipec: String::new(),
                };
                let (lease, _) = store
                    .create_thread(rec.clone(), attempt)
                    .await
                    .expect("create");
                rec.status = if i % 10 == 0 {
                    Status::Paused
                } else {
                    Status::Completed
                };
                store
                    .commit(&lease, vec![Write::Thread(rec)])
                    .await
                    .expect("commit");
            });
        }
        while set.join_next().await.is_some() {}
        done += batch;
    }
}
