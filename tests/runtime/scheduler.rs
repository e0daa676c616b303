//! The scheduler against the in-memory store: readiness, skips, joins, `each`, gates
//! and crash counts, with host functions that record what ran and when. No files, no
//! processes: what is tested is the order and the rows the attempt writes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common;

use common::hooked::{Hooked, Hooks, pass_commit};
use pipec::runtime::{Outcome, RunOptions, Runner};
use pipec::store::*;
use serde_json::{Value, json};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// What ran, in order: "start:<node>" and "end:<node>".
type Log = Arc<Mutex<Vec<String>>>;

fn log_of(log: &Log) -> Vec<String> {
    log.lock().map(|l| l.clone()).unwrap_or_default()
}

/// A host function `step` that logs its node (the `n` parameter), waits until the node
/// named by `meet` (when given) has started too, for at most 10 s, then waits `ms`, and
/// returns `{ v: n.len() }`.
fn with_step(runner: Runner, log: &Log) -> Runner {
    let log = log.clone();
    runner.host_fn_json("step", move |v: Value| {
        let log = log.clone();
        async move {
            let name = v["n"].as_str().unwrap_or("?").to_string();
            let ms = v["ms"].as_u64().unwrap_or(0);
            if let Ok(mut l) = log.lock() {
                l.push(format!("start:{name}"));
            }
            if let Some(other) = v["meet"].as_str() {
                let started = format!("start:{other}");
                for _ in 0..1000 {
                    if log_of(&log).contains(&started) {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(ms)).await;
            if let Ok(mut l) = log.lock() {
                l.push(format!("end:{name}"));
            }
            Ok(json!({ "v": name.len() }))
        }
    })
}

fn position(log: &[String], entry: &str) -> usize {
    log.iter()
        .position(|e| e == entry)
        .unwrap_or_else(|| panic!("{entry} in {log:?}"))
}

#[test]
fn a_node_starts_only_when_everything_it_reads_is_committed() {
    // A diamond: a → (b, c) → d. b and c each wait for the other to start, so they end
    // only if they run at the same time; b is slower; d waits for both.
    let src = r#"
node a(n: string = "a", ms: int = 0) -> { v: int } { host = "step" }
node b(n: string = "b", ms: int = 60, meet: string = "c", x: { v: int } = a) -> { v: int } { host = "step" }
node c(n: string = "c", ms: int = 0, meet: string = "b", x: { v: int } = a) -> { v: int } { host = "step" }
node d(n: string = "d", ms: int = 0, l: { v: int } = b, r: { v: int } = c) -> { v: int } { host = "step" }
output d = d
"#;
    let plan = pipec::compile_str("diamond.pipe", src).expect("compiles");
    let log: Log = Arc::default();
    let store = MemoryStore::new();
    let runner = with_step(Runner::new(plan, store.clone()), &log);
    let out = rt().block_on(runner.start(json!({}))).expect("runs");
    assert!(matches!(out, Outcome::Completed { .. }), "{out:?}");
    let log = log_of(&log);
    assert!(position(&log, "end:a") < position(&log, "start:b"));
    assert!(position(&log, "end:a") < position(&log, "start:c"));
    // b and c run at the same time: each started before the other ended.
    assert!(position(&log, "start:b") < position(&log, "end:c"));
    assert!(position(&log, "start:c") < position(&log, "end:b"));
    assert!(position(&log, "end:b") < position(&log, "start:d"));
    assert!(position(&log, "end:c") < position(&log, "start:d"));
}

#[test]
fn skips_reach_required_parameters_and_stop_at_optional_ones_and_joins() {
    let src = r#"
input go: bool
node gated(n: string = "gated", ms: int = 0, go: bool = input.go) -> { v: int } {
  when = go
  host = "step"
}
node needs(n: string = "needs", ms: int = 0, x: { v: int } = gated) -> { v: int } { host = "step" }
node maybe(n: string = "maybe", ms: int = 0, x: { v: int }? = gated) -> { v: int } { host = "step" }
node joined(x: { v: int } = gated ?? maybe) -> { v: int } { return = x }
output needs: { v: int }? = needs
output maybe = maybe
output joined = joined
"#;
    let plan = pipec::compile_str("skips.pipe", src).expect("compiles");
    let log: Log = Arc::default();
    let store = MemoryStore::new();
    let runner = with_step(Runner::new(plan, store.clone()), &log);
    let rt = rt();
    let out = rt
        .block_on(runner.start(json!({ "go": false })))
        .expect("runs");
    let Outcome::Completed { thread, outputs } = out else {
        panic!("{out:?}");
    };
    assert_eq!(
        outputs,
        json!({ "needs": null, "maybe": { "v": 5 }, "joined": { "v": 5 } })
    );
    let log = log_of(&log);
    assert!(
        !log.iter()
            .any(|e| e.contains("gated") || e.contains("needs")),
        "{log:?}"
    );
    let state = rt.block_on(store.load(&thread)).expect("load");
    assert_eq!(state.nodes["gated"].state, NodeState::Skipped);
    assert_eq!(state.nodes["needs"].state, NodeState::Skipped);
    assert_eq!(state.nodes["maybe"].state, NodeState::Done);
}

#[test]
fn each_runs_items_with_when_per_item_and_an_empty_list_is_no_skip() {
    let src = r#"
input words: string[]
node len(n: string = each(input.words, max: 10), ms: int = 0) -> { v: int } {
  when = n != "skip"
  host = "step"
}
node total(items: { v: int }[] = len) -> { n: int } { return = { n: len(items) } }
output total = total
output lens = len[*].v
"#;
    let plan = pipec::compile_str("each.pipe", src).expect("compiles");
    let log: Log = Arc::default();
    let store = MemoryStore::new();
    let rt = rt();
    let runner = with_step(Runner::new(plan, store.clone()), &log);
    let out = rt
        .block_on(runner.start(json!({ "words": ["ab", "skip", "abcd"] })))
        .expect("runs");
    let Outcome::Completed { outputs, .. } = out else {
        panic!("{out:?}");
    };
    assert_eq!(outputs, json!({ "total": { "n": 2 }, "lens": [2, 4] }));
    let out = rt
        .block_on(runner.start(json!({ "words": [] })))
        .expect("runs");
    let Outcome::Completed { outputs, .. } = out else {
        panic!("{out:?}");
    };
    assert_eq!(outputs, json!({ "total": { "n": 0 }, "lens": [] }));
}

#[test]
fn gates_pause_the_thread_until_answered_and_other_branches_run_meanwhile() {
    let src = r#"
type Ok {
  ok: bool
}
gate first() -> Ok { message = "first?" }
gate second() -> Ok { message = "second?" }
node free(n: string = "free", ms: int = 0) -> { v: int } { host = "step" }
node after(n: string = "after", ms: int = 0, a: Ok = first, b: Ok = second) -> { v: int } { host = "step" }
output after = after
output free = free
"#;
    let plan = pipec::compile_str("gates.pipe", src).expect("compiles");
    let log: Log = Arc::default();
    let store = MemoryStore::new();
    let rt = rt();
    let runner = with_step(Runner::new(plan, store.clone()), &log);
    let out = rt.block_on(runner.start(json!({}))).expect("runs");
    let Outcome::Paused { thread, gates } = out else {
        panic!("{out:?}");
    };
    let names: Vec<&str> = gates.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["first", "second"]);
    assert_eq!(
        log_of(&log),
        ["start:free", "end:free"],
        "the free branch ran"
    );
    // One answer: still paused at the other gate.
    let out = rt
        .block_on(runner.resume(&thread, vec![("first".into(), json!({ "ok": true }))]))
        .expect("resumes");
    let Outcome::Paused { gates, .. } = out else {
        panic!("{out:?}");
    };
    assert_eq!(gates.len(), 1);
    assert_eq!(gates[0].name, "second");
    let out = rt
        .block_on(runner.resume(&thread, vec![("second".into(), json!({ "ok": false }))]))
        .expect("resumes");
    assert!(matches!(out, Outcome::Completed { .. }), "{out:?}");
    assert_eq!(
        log_of(&log).iter().filter(|e| *e == "start:free").count(),
        1
    );
}

#[test]
fn a_node_running_when_its_process_dies_counts_a_crash_and_fails_after_three() {
    let src = r#"
node hang(n: string = "hang", ms: int = 60000) -> { v: int } { host = "step" }
output hang = hang
"#;
    let plan = pipec::compile_str("crash.pipe", src).expect("compiles");
    let log: Log = Arc::default();
    let store = MemoryStore::new();
    let rt = rt();
    let runner = with_step(Runner::new(plan, store.clone()), &log);
    let thread = "01JCRASH000000000000000000".to_string();
    let opts = RunOptions {
        thread_id: Some(thread.clone()),
        ..Default::default()
    };
    // A "crash": the attempt is dropped while the node runs; its lease goes with it.
    let crashed = rt.block_on(async {
        tokio::time::timeout(
            Duration::from_millis(150),
            runner.start_with(json!({}), opts),
        )
        .await
    });
    assert!(crashed.is_err(), "the attempt was cut off");
    for crash in 1..=2 {
        let cut = rt.block_on(async {
            tokio::time::timeout(Duration::from_millis(150), runner.resume(&thread, vec![])).await
        });
        assert!(cut.is_err(), "the attempt was cut off");
        let state = rt.block_on(store.load(&thread)).expect("load");
        assert_eq!(
            state.nodes["hang"].crash_count, crash,
            "crash {crash} counted"
        );
        assert_eq!(state.nodes["hang"].state, NodeState::Running);
    }
    // The third resume finds the node crashed three times: it fails instead of running.
    let out = rt
        .block_on(runner.resume(&thread, vec![]))
        .expect("resumes");
    let Outcome::Failed { error, .. } = out else {
        panic!("{out:?}");
    };
    assert_eq!(error.code, "R0408", "{error:?}");
    assert_eq!(
        log_of(&log).iter().filter(|e| *e == "start:hang").count(),
        3,
        "it ran three times, not a fourth"
    );
}

#[test]
fn a_nodes_final_row_keeps_the_tries_its_retries_used() {
    let src = r#"
node flaky(n: string = "flaky") -> { v: int } {
  host = "flaky"
  retries = 3
  backoff = 1ms
}
output flaky = flaky
"#;
    let plan = pipec::compile_str("retry.pipe", src).expect("compiles");
    let calls = Arc::new(Mutex::new(0u32));
    let seen = calls.clone();
    let store = MemoryStore::new();
    let runner = Runner::new(plan, store.clone()).host_fn_json("flaky", move |_v: Value| {
        let seen = seen.clone();
        async move {
            let mut n = seen.lock().map_err(|e| e.to_string())?;
            *n += 1;
            if *n < 3 {
                Err("not yet".to_string())
            } else {
                Ok(json!({ "v": 1 }))
            }
        }
    });
    let rt = rt();
    let out = rt.block_on(runner.start(json!({}))).expect("runs");
    let Outcome::Completed { thread, .. } = out else {
        panic!("{out:?}");
    };
    let state = rt.block_on(store.load(&thread)).expect("load");
    let row = &state.nodes["flaky"];
    assert_eq!(row.state, NodeState::Done);
    assert_eq!(row.tries, 2, "two retries were used: {row:?}");
    let events = rt.block_on(store.events(&thread, 0)).expect("events");
    let retries = events
        .iter()
        .filter(|e| e.event.kind() == "retry_scheduled")
        .count();
    assert_eq!(retries, 2);
}

#[test]
fn a_stop_lets_the_step_in_flight_commit_and_releases_the_thread_to_the_queue() {
    // a is slow; the stop comes while it runs: a finishes and commits, b never starts.
    let src = r#"
node a(n: string = "a", ms: int = 200) -> { v: int } { host = "step" }
node b(n: string = "b", ms: int = 0, x: { v: int } = a) -> { v: int } { host = "step" }
output b = b
"#;
    let plan = pipec::compile_str("stop.pipe", src).expect("compiles");
    let log: Log = Arc::default();
    let store = MemoryStore::new();
    let runner = with_step(Runner::new(plan, store.clone()), &log);
    let rt = rt();
    let stop = pipec::runtime::StopSignal::default();
    let opts = RunOptions {
        stop: Some(stop.clone()),
        ..Default::default()
    };
    let out = rt.block_on(async {
        let run = runner.start_with(json!({}), opts);
        let signal = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            stop.stop();
        };
        tokio::join!(run, signal).0
    });
    let Ok(Outcome::Released { thread }) = out else {
        panic!("released: {out:?}");
    };
    assert_eq!(log_of(&log), ["start:a", "end:a"]);
    let state = rt.block_on(store.load(&thread)).expect("load");
    let rec = state.thread.expect("thread");
    assert_eq!(rec.status, pipec::store::Status::Queued);
    assert!(rec.holder.is_none());
    assert!(!store.is_held(&thread), "no lease is left held");
    assert_eq!(state.nodes["a"].state, NodeState::Done);
    assert!(!state.nodes.contains_key("b"));
    // The next attempt goes on from there: a is not run again.
    let out = rt
        .block_on(runner.resume(&thread, Vec::new()))
        .expect("resumes");
    assert!(matches!(out, Outcome::Completed { .. }), "{out:?}");
    assert_eq!(log_of(&log), ["start:a", "end:a", "start:b", "end:b"]);
}

/// A commit as [`Commits`] saw it: whether it was the attempt's last, and its node rows.
type Seen = (bool, Vec<String>);

/// Records each commit: whether it was the attempt's last (`Store::commit_last`), the
/// node rows in it, and how many item rows.
#[derive(Clone, Default)]
struct Commits(Arc<Mutex<Vec<(Seen, usize)>>>);

impl Commits {
    fn seen(&self) -> Vec<Seen> {
        let all = self.0.lock().map(|s| s.clone()).unwrap_or_default();
        all.into_iter().map(|(seen, _)| seen).collect()
    }

    /// How many item rows each commit held.
    fn items(&self) -> Vec<usize> {
        let all = self.0.lock().map(|s| s.clone()).unwrap_or_default();
        all.into_iter().map(|(_, items)| items).collect()
    }

    /// A memory store behind this record.
    fn store(&self) -> Arc<Hooked<Commits>> {
        Arc::new(Hooked {
            inner: Arc::new(MemoryStore::new()),
            hooks: self.clone(),
        })
    }
}

impl Hooks for Commits {
    fn commit<'a>(
        &'a self,
        inner: &'a dyn Store,
        lease: &'a Lease,
        writes: Vec<Write>,
        last: bool,
    ) -> StoreFuture<'a, Vec<RecordedEvent>> {
        let nodes = writes
            .iter()
            .filter_map(|w| match w {
                Write::Node(name, _) => Some(name.clone()),
                _ => None,
            })
            .collect();
        let items = writes
            .iter()
            .filter(|w| matches!(w, Write::Item(..)))
            .count();
        if let Ok(mut s) = self.0.lock() {
            s.push(((last, nodes), items));
        }
        pass_commit(inner, lease, writes, last)
    }
}

#[test]
fn an_attempt_of_pure_nodes_commits_once_and_that_commit_is_its_last() {
    // Five pure nodes: nothing to start, so nothing commits until the thread ends,
    // and then all of it at once with the end (the claim wrote the thread running).
    let src = r#"
input x: int
node n0(x: int = input.x) -> int { return = x }
node n1(p: int = n0) -> int { return = p }
node n2(p: int = n1) -> int { return = p }
node n3(p: int = n2) -> int { return = p }
node n4(p: int = n3) -> int { return = p }
output last = n4
"#;
    let plan = pipec::compile_str("pure.pipe", src).expect("compiles");
    let commits = Commits::default();
    let store = commits.store();
    let runner = Runner::with_store(plan, store.clone());
    let rt = rt();
    let out = rt.block_on(runner.start(json!({ "x": 7 }))).expect("runs");
    let Outcome::Completed { thread, outputs } = out else {
        panic!("{out:?}");
    };
    assert_eq!(outputs, json!({ "last": 7 }));
    let nodes: Vec<String> = (0..5).map(|i| format!("n{i}")).collect();
    assert_eq!(commits.seen(), vec![(true, nodes)]);
    assert!(!store.is_held(&thread));
    let state = rt.block_on(store.load(&thread)).expect("load");
    assert!(state.nodes.values().all(|n| n.state == NodeState::Done));
}

#[test]
fn what_pure_nodes_wrote_commits_with_the_started_row_of_the_next_call() {
    // A pure node, then a host call: the pure node's row goes with the call's started
    // row, in the commit before the call starts; the call's end and the thread's end go
    // together in the last.
    let src = r#"
node a(x: int = 1) -> int { return = x }
node b(n: string = "b", ms: int = 0, x: int = a) -> { v: int } { host = "step" }
output b = b
"#;
    let plan = pipec::compile_str("mixed.pipe", src).expect("compiles");
    let commits = Commits::default();
    let log: Log = Arc::default();
    let runner = with_step(Runner::with_store(plan, commits.store()), &log);
    let out = rt().block_on(runner.start(json!({}))).expect("runs");
    assert!(matches!(out, Outcome::Completed { .. }), "{out:?}");
    let seen = commits.seen();
    assert_eq!(
        seen.first(),
        Some(&(false, vec!["a".into(), "b".into()])),
        "{seen:?}"
    );
    assert_eq!(seen.last(), Some(&(true, vec!["b".into()])), "{seen:?}");
    assert_eq!(seen.iter().filter(|(last, _)| *last).count(), 1, "{seen:?}");
}

#[test]
fn done_items_of_work_free_to_redo_share_commits_and_effects_commit_each() {
    // 300 items of a host function (free to run again): their rows wait for one another,
    // a few commits for all of them, and every row is stored when the node ends.
    let src = r#"
input words: string[]
node len(n: string = each(input.words, max: 1000), ms: int = 0) -> { v: int } {
  host = "step"
  concurrency = 8
}
output lens = len[*].v
"#;
    let plan = pipec::compile_str("each.pipe", src).expect("compiles");
    let commits = Commits::default();
    let store = commits.store();
    let log: Log = Arc::default();
    let runner = with_step(Runner::with_store(plan, store.clone()), &log);
    let words: Vec<String> = (0..300).map(|i| "x".repeat(i % 7 + 1)).collect();
    let rt = rt();
    let out = rt
        .block_on(runner.start(json!({ "words": words })))
        .expect("runs");
    let Outcome::Completed { thread, outputs } = out else {
        panic!("{out:?}");
    };
    let lens: Vec<usize> = words.iter().map(String::len).collect();
    assert_eq!(outputs, json!({ "lens": lens }));
    let seen = commits.items();
    assert_eq!(seen.iter().sum::<usize>(), 300, "{seen:?}");
    let with_items = seen.iter().filter(|n| **n > 0).count();
    // One commit each without group commit; a few with it (a slow machine stretches the
    // run over more of its 50 ms windows, hence the margin).
    assert!(
        with_items <= 300 / 5,
        "{with_items} commits held the 300 items: {seen:?}"
    );
    let state = rt.block_on(store.load(&thread)).expect("load");
    assert_eq!(state.items.len(), 300);
    assert!(state.items.values().all(|i| i.state == ItemState::Done));

    // Items of an effect (a command that is not idempotent) each commit their row
    // before the next thing: a crash must not lose that it ran.
    let src = r#"
input ids: int[]
node send(id: int = each(input.ids, max: 100)) -> { v: int } {
  exec = ["sh", "-c", "cat >/dev/null; printf '{\"v\":1}'"]
  concurrency = 4
}
output sent = send
"#;
    let plan = pipec::compile_str("effect.pipe", src).expect("compiles");
    let commits = Commits::default();
    let store = commits.store();
    let dir = common::Project::new("effect-items");
    let runner = Runner::with_store(plan, store).project_root(dir.dir.clone());
    let ids: Vec<u32> = (0..20).collect();
    let out = rt
        .block_on(runner.start(json!({ "ids": ids })))
        .expect("runs");
    assert!(matches!(out, Outcome::Completed { .. }), "{out:?}");
    let seen = commits.items();
    assert_eq!(
        seen.iter().filter(|n| **n == 1).count(),
        20,
        "one commit an item: {seen:?}"
    );
}

/// Names each operation that writes, in order; with `hold`, a `claim_answering` first
/// claims the thread for another attempt and keeps that lease (a process that took the
/// thread between a resume's look and its claim).
#[derive(Clone, Default)]
struct Ops {
    seen: Arc<Mutex<Vec<&'static str>>>,
    hold: bool,
    held: Arc<Mutex<Option<Lease>>>,
}

impl Ops {
    fn push(&self, op: &'static str) {
        if let Ok(mut s) = self.seen.lock() {
            s.push(op);
        }
    }
    fn take(&self) -> Vec<&'static str> {
        self.seen
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default()
    }
}

impl Hooks for Ops {
    fn claim<'a>(
        &'a self,
        inner: &'a dyn Store,
        thread: &str,
        attempt: AttemptRec,
    ) -> StoreFuture<'a, Claimed> {
        self.push("claim");
        inner.claim(thread, attempt)
    }
    fn claim_answering<'a>(
        &'a self,
        inner: &'a dyn Store,
        thread: &str,
        attempt: AttemptRec,
        answers: Vec<(String, Value)>,
        by: &str,
    ) -> StoreFuture<'a, Claimed> {
        self.push("claim_answering");
        let (thread, by) = (thread.to_string(), by.to_string());
        Box::pin(async move {
            if self.hold {
                let mut other = attempt.clone();
                other.run_id = "another".into();
                let (lease, _, _) = inner.claim(&thread, other).await?;
                if let Ok(mut h) = self.held.lock() {
                    *h = Some(lease);
                }
            }
            inner.claim_answering(&thread, attempt, answers, &by).await
        })
    }
    fn commit<'a>(
        &'a self,
        inner: &'a dyn Store,
        lease: &'a Lease,
        writes: Vec<Write>,
        last: bool,
    ) -> StoreFuture<'a, Vec<RecordedEvent>> {
        self.push(if last { "commit_last" } else { "commit" });
        pass_commit(inner, lease, writes, last)
    }
    fn answer<'a>(
        &'a self,
        inner: &'a dyn Store,
        thread: &str,
        answers: Vec<(String, Value)>,
        by: &str,
    ) -> StoreFuture<'a, Vec<RecordedEvent>> {
        self.push("answer");
        inner.answer(thread, answers, by)
    }
}

const GATED: &str = r#"
input x: int
node prepare(x: int = input.x) -> { v: int } { return = { v: x } }
gate approve(s: { v: int } = prepare) -> bool { message = "go on?" }
node finish(ok: bool = approve, s: { v: int } = prepare) -> { v: int } {
  when = ok
  return = { v: s.v }
}
output result: { v: int }? = finish
"#;

/// `GATED` run on a memory store behind `ops` up to its gate, `ops` cleared after.
fn paused_at_the_gate(ops: &Ops) -> (tokio::runtime::Runtime, Arc<Hooked<Ops>>, Runner, String) {
    let plan = pipec::compile_str("gated.pipe", GATED).expect("compiles");
    let store = Arc::new(Hooked {
        inner: Arc::new(MemoryStore::new()),
        hooks: ops.clone(),
    });
    let rt = rt();
    let runner = Runner::with_store(plan, store.clone());
    let Outcome::Paused { thread, .. } =
        rt.block_on(runner.start(json!({ "x": 3 }))).expect("runs")
    else {
        panic!("paused at the gate");
    };
    ops.take();
    (rt, store, runner, thread)
}

#[test]
fn a_resume_with_an_answer_answers_and_claims_in_one_commit_and_ends_in_the_next() {
    let ops = Ops::default();
    let (rt, store, runner, thread) = paused_at_the_gate(&ops);
    let out = rt
        .block_on(runner.resume(&thread, vec![("approve".into(), json!(true))]))
        .expect("resumes");
    let Outcome::Completed { outputs, .. } = out else {
        panic!("{out:?}");
    };
    assert_eq!(outputs, json!({ "result": { "v": 3 } }));
    assert_eq!(ops.take(), ["claim_answering", "commit_last"]);
    let state = rt.block_on(store.load(&thread)).expect("load");
    assert_eq!(state.gates["approve"].answer, Some(json!(true)));
}

#[test]
fn a_thread_taken_before_the_resumes_claim_gets_the_answer_alone_and_the_resume_is_refused() {
    let ops = Ops {
        hold: true,
        ..Ops::default()
    };
    let (rt, store, runner, thread) = paused_at_the_gate(&ops);
    let err = rt
        .block_on(runner.resume(&thread, vec![("approve".into(), json!(true))]))
        .expect_err("another process holds the thread");
    assert_eq!(err.code, "R0402", "{err:?}");
    assert_eq!(ops.take(), ["claim_answering", "answer"]);
    // The holder sees the answer.
    let state = rt.block_on(store.load(&thread)).expect("load");
    assert_eq!(state.gates["approve"].answer, Some(json!(true)));
    assert!(store.is_held(&thread));
}
