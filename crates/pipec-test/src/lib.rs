//! `pipec test`: runs a pipeline's tests, each on a throwaway store of its own.
//!
//! A test ([`TestCase`], proved by `pipec check`) starts a thread with its inputs and a
//! fixed id, every model of the pipeline answering from the test's scripted replies, in an
//! environment holding only the test's `env` (so a test does not depend on the shell it
//! runs in). When the thread pauses at a gate the test answers, it is resumed in a new
//! attempt with the answer, as `pipec resume` would — with the test's faults injected
//! (links that died during the pause). A test with a `tape` answers its models and MCP
//! servers from the tape, and records it when asked to (the `tape` module). When it
//! stops, the test's status and conditions
//! are read against what the store holds: outputs, node values and states, the calls
//! made, heals, usage (the `scope` module).

mod child;
mod replay;
mod report;
mod scope;
mod tap;
mod tape;
mod text;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use pipec_plan::Plan;
use pipec_plan::testing::{Replies, TestCase};
use pipec_runtime::show::Stored;
use pipec_runtime::{Decision, Outcome, RunOptions, Runner};
use pipec_store::Store;

pub use child::run_killed;
pub use replay::{NodeChange, Replay, ReplayReport, replay};
pub use report::{human, json, junit};

/// Where a test runs: the pipeline's plan and where it came from.
pub struct Context {
    pub plan: Plan,
    /// The project root (prompts, relative paths).
    pub root: PathBuf,
    /// The pipeline file, as reports name it.
    pub source: String,
    /// A folder for the test's store and replies, made empty first.
    pub work: PathBuf,
    /// The command that runs one of this file's tests in a process of its own (the
    /// test's name is appended): a test that kills its run (`faults { kill_after }`)
    /// needs a process to kill. `pipec test FILE --killed-run` for the CLI; without it
    /// such a test fails, saying so.
    pub child: Option<Vec<std::ffi::OsString>>,
    /// Write the snapshots of tests whose outputs differ from theirs (or have none yet),
    /// instead of failing them.
    pub update: bool,
    /// Record the tapes of tests that have one, against the real models and servers
    /// (the process environment behind the test's `env`), instead of answering from them.
    pub record: bool,
}

/// How a test went.
#[derive(Clone, Debug, Serialize)]
pub struct TestResult {
    /// The pipeline file.
    pub file: String,
    pub name: String,
    pub line: u32,
    pub passed: bool,
    /// The thread's status when it stopped (none when it never started).
    pub status: Option<String>,
    pub thread: Option<String>,
    /// The test's store, kept until the test runs again: `pipec show THREAD --store ...`.
    pub store: String,
    /// The tape the test recorded (`--record`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded: Option<String>,
    /// The snapshot the test wrote (`--update`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated: Option<String>,
    pub ms: u64,
    pub failures: Vec<Failure>,
}

/// One thing that did not hold.
#[derive(Clone, Debug, Serialize)]
pub struct Failure {
    /// The condition as written, or what else was checked (`status`, `answers`, `run`).
    pub what: String,
    pub line: u32,
    pub message: String,
}

/// Runs one test.
pub async fn run(cx: &Context, test: &TestCase) -> TestResult {
    let started = Instant::now();
    let mut result = TestResult {
        file: cx.source.clone(),
        name: test.name.clone(),
        line: test.line,
        passed: false,
        status: None,
        thread: None,
        store: cx.work.join("runs.redb").display().to_string(),
        recorded: None,
        updated: None,
        ms: 0,
        failures: Vec::new(),
    };
    if let Err(message) = run_into(cx, test, &mut result).await {
        result.failures.push(Failure {
            what: "run".into(),
            line: test.line,
            message,
        });
    }
    result.passed = result.failures.is_empty();
    result.ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    result
}

async fn run_into(cx: &Context, test: &TestCase, result: &mut TestResult) -> Result<(), String> {
    if cx.work.exists() {
        std::fs::remove_dir_all(&cx.work)
            .map_err(|e| format!("cannot empty {}: {e}", cx.work.display()))?;
    }
    std::fs::create_dir_all(&cx.work)
        .map_err(|e| format!("cannot make {}: {e}", cx.work.display()))?;
    let killed = !test.faults.kill_after.is_empty();
    if killed {
        // The part of the run that ends in `kill -9` runs in a process of its own; the
        // store is opened here only once that process is gone.
        child::run_until_killed(cx, test).await?;
    }
    let setup = Setup::new(cx, test, Role::Test)?;
    let thread_id = thread_id(&cx.source, &test.name);
    let first = if killed {
        child::take_over(&setup, &cx.work);
        let opts = RunOptions {
            decisions: decisions(&*setup.store, &thread_id, test).await?,
            ..Default::default()
        };
        setup
            .runner(cx, test, true)
            .resume_with(&thread_id, Vec::new(), opts)
            .await
            .map_err(|e| format!("the resume after the kill was refused: {e}"))?
    } else {
        setup.start(cx, test, &thread_id).await?
    };
    let outcome = setup.answer_gates(cx, test, first).await?;
    let thread = outcome.thread().to_string();
    result.thread = Some(thread.clone());
    if let Some(tape) = setup.tape.as_ref().filter(|t| t.recording()) {
        tape.save()?;
        result.recorded = test.tape.as_ref().map(|p| shown_path(&cx.root, p));
    }
    for (fault, tool) in setup.faults.unfired() {
        result.failures.push(Failure {
            what: "faults".into(),
            line: test.line,
            message: format!(
                "the fault `{fault}` of `{tool}` never fired: the run never called `{tool}`"
            ),
        });
    }
    if let Some(tape) = &setup.tape {
        for miss in tape.misses() {
            result.failures.push(Failure {
                what: "tape".into(),
                line: test.line,
                message: miss,
            });
        }
    }
    let stored = Stored::load(&*setup.store, &thread)
        .await
        .map_err(|e| format!("cannot read the thread back: {e}"))?;
    let view = stored
        .view(true, None)
        .ok_or_else(|| "the thread has no record".to_string())?;
    // A gate is asked when the run stopped there, in this process or the killed one.
    let asked: std::collections::BTreeSet<&str> =
        view.gates.iter().map(|g| g.gate.as_str()).collect();
    for gate in test.answers.keys().filter(|g| !asked.contains(g.as_str())) {
        result.failures.push(Failure {
            what: "answers".into(),
            line: test.line,
            message: format!("the test answers the gate `{gate}`, which the run never asked"),
        });
    }
    result.status = Some(view.status.clone());
    if view.status != test.status {
        result.failures.push(Failure {
            what: "status".into(),
            line: test.line,
            message: format!(
                "the thread ended {}, not {}{}",
                view.status,
                test.status,
                why_stopped(&outcome, view.error.as_ref())
            ),
        });
    }
    if let Some(path) = &test.snapshot {
        snapshot(cx, test, path, view.outputs.clone(), result);
    }
    let params = scope::of(&cx.plan, &view, &setup.calls.by_tool(), &stored.events);
    for e in &test.expect {
        if let Some(message) = scope::unmet(&params, &e.expr) {
            result.failures.push(Failure {
                what: e.text.clone(),
                line: e.line,
                message,
            });
        }
    }
    Ok(())
}

/// The thread's outputs against the test's snapshot: equal, else a failure with the
/// lines that differ, or (`--update`) the snapshot written anew.
fn snapshot(
    cx: &Context,
    test: &TestCase,
    path: &str,
    outputs: Option<Value>,
    result: &mut TestResult,
) {
    let shown = shown_path(&cx.root, path);
    let got = outputs.unwrap_or(Value::Null);
    let text = serde_json::to_string_pretty(&got).unwrap_or_default() + "\n";
    let kept = read_capped(Path::new(path), MAX_SNAPSHOT_BYTES);
    let kept_value = kept
        .as_deref()
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(t).ok());
    if kept_value.as_ref() == Some(&got) {
        return;
    }
    let mut fail = |message: String| {
        result.failures.push(Failure {
            what: "snapshot".into(),
            line: test.line,
            message,
        })
    };
    if cx.update {
        let written = Path::new(path)
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(path, &text));
        match written {
            Ok(()) => result.updated = Some(shown),
            Err(e) => fail(format!("cannot write the snapshot {shown}: {e}")),
        }
        return;
    }
    match (kept, kept_value) {
        (Err(e), _) if e.kind() == std::io::ErrorKind::NotFound => fail(format!(
            "there is no snapshot {shown} yet: `pipec test --update` writes it from this run"
        )),
        (Err(e), _) => fail(format!(
            "cannot read the snapshot {shown}: {e}; `pipec test --update` writes it again"
        )),
        (Ok(_), None) => fail(format!(
            "the snapshot {shown} is not JSON: `pipec test --update` writes it again"
        )),
        (Ok(_), Some(kept)) => {
            let old = serde_json::to_string_pretty(&kept).unwrap_or_default();
            fail(format!(
                "the outputs differ from the snapshot {shown} (- snapshot, + got); `pipec test --update` takes these:\n{}",
                text::line_diff(&old, text.trim_end())
            ))
        }
    }
}

/// Where the thread stopped and why, for a status the test did not expect.
fn why_stopped(outcome: &Outcome, error: Option<&pipec_store::StoredError>) -> String {
    let coded = text::coded;
    match outcome {
        Outcome::Paused { gates, .. } => format!(
            " at {} (the test gives no answer)",
            gates
                .iter()
                .map(|g| format!("`{}`", g.name))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Outcome::Blocked { reasons, .. } => format!(
            ": {} (`retry_unfinished` or `resolve` decides)",
            reasons.iter().map(coded).collect::<Vec<_>>().join("; ")
        ),
        _ => error.map_or(String::new(), |e| format!(": {}", coded(e))),
    }
}

/// The test's decisions on the calls a kill or a lost answer left unfinished, by their
/// keys.
async fn decisions(
    store: &dyn Store,
    thread: &str,
    test: &TestCase,
) -> Result<Vec<(String, Decision)>, String> {
    let stored = Stored::load(store, thread)
        .await
        .map_err(|e| format!("cannot read the killed thread: {e}"))?;
    let view = stored
        .view(true, None)
        .ok_or_else(|| "the killed run left no thread".to_string())?;
    let mut out = Vec::new();
    for c in view.calls.iter().flatten() {
        // Started and never finished (a kill), or its outcome lost (a crash).
        if !matches!(
            c.record.state,
            pipec_store::CallState::Started | pipec_store::CallState::Unknown
        ) {
            continue;
        }
        let node = c.call.split(':').next().unwrap_or_default();
        if test.retry_unfinished.iter().any(|n| n == node) {
            out.push((c.call.clone(), Decision::Retry));
        } else if let Some(v) = test.resolve.get(node) {
            out.push((c.call.clone(), Decision::Performed(v.clone())));
        }
    }
    Ok(out)
}

/// Which process runs the test's thread.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// The test itself: the whole run, or what follows the kill.
    Test,
    /// The process that runs until a `kill_after` effect kills it.
    Killed,
}

/// What every attempt of a test shares: its store, replies, tape and the calls noted.
struct Setup {
    store: Arc<dyn Store>,
    replies: Option<PathBuf>,
    tape: Option<Arc<tape::Tape>>,
    calls: Arc<tap::Calls>,
    faults: Arc<tap::ServerFaults>,
    /// How much time the test has skipped so far (its clock never goes back).
    skipped: std::sync::atomic::AtomicU64,
    /// The variables read as secrets, which a recording takes from the shell.
    secrets: Arc<std::collections::BTreeSet<String>>,
    role: Role,
}

impl Setup {
    fn new(cx: &Context, test: &TestCase, role: Role) -> Result<Setup, String> {
        let store: Arc<dyn Store> = Arc::new(
            pipec_store::RedbStore::open(cx.work.join("runs.redb"))
                .map_err(|e| format!("cannot open the test's store: {e}"))?,
        );
        let replies = replies_file(&cx.work, test)?;
        let recording = cx.record && test.tape.is_some();
        let tape = match &test.tape {
            Some(path) => Some(tape::Tape::open(
                Path::new(path),
                &shown_path(&cx.root, path),
                recording,
                Arc::new(cx.plan.clone()),
            )?),
            None => None,
        };
        let calls = tap::Calls::new(&cx.plan);
        Ok(Setup {
            store,
            replies,
            tape,
            calls: Arc::new(calls),
            faults: Arc::new(tap::ServerFaults::new(&test.faults, &cx.plan)),
            skipped: std::sync::atomic::AtomicU64::new(0),
            secrets: Arc::new(pipec_runtime::secret_names(&cx.plan)),
            role,
        })
    }

    /// A runner for one attempt; `resuming`: the test's faults for a resume are armed.
    fn runner(&self, cx: &Context, test: &TestCase, resuming: bool) -> Runner {
        let env = test.env.clone();
        let recording = self.tape.as_ref().is_some_and(|t| t.recording());
        let mut r = Runner::with_store(cx.plan.clone(), self.store.clone())
            .project_root(&cx.root)
            .source(&cx.source);
        r = if recording {
            // The real endpoints and servers need the real keys: a secret the shell
            // sets wins over the test's stand-in; the test's `env()` values win over
            // the shell's, as in every run.
            let secrets = self.secrets.clone();
            r.environment(move |k| {
                let shell = || std::env::var(k).ok();
                if secrets.contains(k) {
                    shell().or_else(|| env.get(k).cloned())
                } else {
                    env.get(k).cloned().or_else(shell)
                }
            })
        } else {
            r.environment(move |k| env.get(k).cloned())
        };
        if let Some(file) = &self.replies {
            for model in &cx.plan.models {
                r = r.model_override(&model.name, &format!("scripted:{}", file.display()));
            }
        }
        if let Some(tape) = self.tape.as_ref().filter(|t| !t.recording()) {
            if self.replies.is_none() {
                for model in &cx.plan.models {
                    r = r.model(&model.name, tape.model(&model.name, None));
                }
            }
            r = r.servers(Arc::new(tape.servers(None)));
        }
        r = r.tap(Arc::new(tap::TestTap {
            calls: self.calls.clone(),
            faults: self.faults.clone(),
            tape: self.tape.clone(),
            taped_models: self.replies.is_none(),
        }));
        if resuming {
            r = r.dead_links(test.faults.dead_links.clone());
        }
        if self.role == Role::Killed {
            r = r.kill_after(test.faults.kill_after.clone());
        }
        r.clock_ahead(self.skipped.load(Ordering::Relaxed))
    }

    async fn start(&self, cx: &Context, test: &TestCase, thread: &str) -> Result<Outcome, String> {
        let opts = RunOptions {
            thread_id: Some(thread.to_string()),
            ..Default::default()
        };
        let inputs = Value::Object(test.inputs.clone().into_iter().collect());
        self.runner(cx, test, false)
            .start_with(inputs, opts)
            .await
            .map_err(|e| format!("the run was refused: {e}"))
    }

    /// Answers the gates the thread waits at, round after round, as `pipec resume`
    /// would, and decides on the effects a blocked thread left unfinished as the test
    /// says (`retry_unfinished`, `resolve`); a gate asked again (a rerun) is answered
    /// again, and a call is decided once, so the rounds are bounded.
    async fn answer_gates(
        &self,
        cx: &Context,
        test: &TestCase,
        mut outcome: Outcome,
    ) -> Result<Outcome, String> {
        let mut decided = std::collections::BTreeSet::new();
        for _ in 0..=(test.answers.len() + 1) * 4 {
            outcome = match &outcome {
                Outcome::Paused { thread, gates } => {
                    // A gate the test answers by name, or the question of an
                    // `input_required` fault, by the tool it asks about.
                    let answers: Vec<(String, Value)> = gates
                        .iter()
                        .filter_map(|g| {
                            let answer = test.answers.get(&g.name).or_else(|| {
                                test.questions.get(tap::questioned_tool(&g.message)?)
                            })?;
                            Some((g.name.clone(), answer.clone()))
                        })
                        .collect();
                    // The gates nobody answers: the clock skips past the last deadline.
                    let now = pipec_store::ids::now_ms();
                    let skip = gates
                        .iter()
                        .filter(|g| test.timeouts.contains(&g.name))
                        .filter_map(|g| g.deadline_ms)
                        .map(|d| d.saturating_sub(now) + 1)
                        .max();
                    if answers.is_empty() && skip.is_none() {
                        break;
                    }
                    if let Some(ms) = skip {
                        self.skipped.fetch_max(ms, Ordering::Relaxed);
                        child::note(serde_json::json!({ "skipped": ms }));
                    }
                    self.runner(cx, test, true)
                        .resume(thread, answers)
                        .await
                        .map_err(|e| format!("the resume was refused: {e}"))?
                }
                Outcome::Blocked { thread, .. } if self.role == Role::Test => {
                    let decisions: Vec<(String, Decision)> = decisions(&*self.store, thread, test)
                        .await?
                        .into_iter()
                        .filter(|(call, _)| decided.insert(call.clone()))
                        .collect();
                    if decisions.is_empty() {
                        break;
                    }
                    let opts = RunOptions {
                        decisions,
                        ..Default::default()
                    };
                    self.runner(cx, test, true)
                        .resume_with(thread, Vec::new(), opts)
                        .await
                        .map_err(|e| format!("the resume was refused: {e}"))?
                }
                _ => break,
            };
        }
        Ok(outcome)
    }
}

/// The replies every model gives: the test's file, or its inline replies written out.
fn replies_file(work: &Path, test: &TestCase) -> Result<Option<PathBuf>, String> {
    match &test.replies {
        None => Ok(None),
        Some(Replies::File(path)) => Ok(Some(PathBuf::from(path))),
        Some(Replies::Inline(v)) => {
            let path = work.join("replies.json");
            let text = serde_json::to_string_pretty(v).map_err(|e| e.to_string())?;
            std::fs::write(&path, text)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            Ok(Some(path))
        }
    }
}

/// The largest snapshot read, in bytes.
const MAX_SNAPSHOT_BYTES: u64 = 64 << 20;

/// A project file's text, refused (not read) when it is larger than `max` bytes.
pub(crate) fn read_capped(path: &Path, max: u64) -> std::io::Result<String> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    let mut text = String::new();
    file.take(max + 1).read_to_string(&mut text)?;
    if text.len() as u64 > max {
        return Err(std::io::Error::other(format!(
            "it is larger than {} MiB, which a test file may hold",
            max >> 20
        )));
    }
    Ok(text)
}

/// A path as the project names it: relative to its root when it is beneath it.
fn shown_path(root: &Path, path: &str) -> String {
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    Path::new(path)
        .strip_prefix(&root)
        .map_or_else(|_| path.to_string(), |p| p.display().to_string())
}

/// A thread id fixed by the file and the test, so two runs of a test make the same ids.
pub fn thread_id(source: &str, test: &str) -> String {
    // FNV-1a, 128 bits: stable across builds and platforms.
    let mut h: u128 = 0x6c62272e07bb014262b821756295c58d;
    for b in source.bytes().chain([0]).chain(test.bytes()) {
        h ^= u128::from(b);
        h = h.wrapping_mul(0x0000000001000000000000000000013B);
    }
    pipec_store::ids::encode(h)
}

#[cfg(test)]
mod tests {
    use super::read_capped;

    #[test]
    fn a_file_over_its_cap_is_refused_not_read() {
        let dir = std::env::temp_dir().join(format!("pipec-read-capped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("tape.json");
        std::fs::write(&path, "12345").expect("write");
        assert_eq!(read_capped(&path, 5).expect("at the cap"), "12345");
        let err = read_capped(&path, 4).expect_err("over the cap");
        assert!(err.to_string().contains("larger than"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
