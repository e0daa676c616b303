//! `pipec worker` and `pipec run --submit` with real processes on a real store: a queued
//! thread run by a worker to the outputs `pipec run` gives, a gate answered from another
//! process while the worker waits, threads run at once, a graceful stop that releases the
//! thread with nothing repeated, a worker killed with `kill -9` and taken over, and the
//! command line's refusals.

#![cfg(target_os = "linux")]

use crate::common;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// Three effects in a chain; `b` is idempotent (it may run again after a crash).
const CHAIN: &str = r#"type V {
  v: int
}

input seed: int

node a(seed: int = input.seed) -> V {
  exec = ["./step.sh", "a"]
}

node b(prev: V = a) -> V {
  exec = ["./step.sh", "b"]
  idempotent = true
}

node c(prev: V = b) -> V {
  exec = ["./step.sh", "c"]
}

output last = c
"#;

/// Marks that it started (`started.THREAD.STEP`); while `hold.STEP` exists it waits for
/// `release.STEP`; then records the effect (`effects.log`) and adds one.
const STEP: &str = r#"#!/bin/sh
input=$(cat)
touch "started.$PIPEC_THREAD.$1"
if [ -e "hold.$1" ]; then
  while [ ! -e "release.$1" ]; do sleep 0.02; done
fi
v=$(printf '%s' "$input" | sed -n 's/.*"prev":{"v":\([0-9]*\)}.*/\1/p')
[ -n "$v" ] || v=$(printf '%s' "$input" | sed -n 's/.*"seed":\([0-9]*\).*/\1/p')
echo "$PIPEC_THREAD $1" >> effects.log
printf '{"v":%d}\n' $((v + 1))
"#;

const WITHIN: Duration = Duration::from_secs(30);

/// A project and the store its commands name (`--store`): a redb file, or a schema of
/// the PostgreSQL server the tests are given.
struct Ctx {
    p: Project,
    store: String,
}

impl std::ops::Deref for Ctx {
    type Target = Project;
    fn deref(&self) -> &Project {
        &self.p
    }
}

impl Ctx {
    fn with_store<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        let mut all = args.to_vec();
        all.extend_from_slice(&["--store", &self.store]);
        all
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        self.cmd(args)
            .stdin(Stdio::null())
            .output()
            .expect("pipec runs")
    }

    /// A command on the store; on PostgreSQL leases last 1.5 s, so a killed worker's
    /// threads are taken over soon.
    fn cmd(&self, args: &[&str]) -> std::process::Command {
        let mut c = self.p.cmd(&self.with_store(args));
        c.env("PIPEC_LEASE_TTL_MS", "1500");
        c
    }
}

/// A project with the chain pipeline on a redb store.
fn redb(tag: &str) -> Ctx {
    let p = chain_project(tag);
    let store = p.store().display().to_string();
    Ctx { p, store }
}

/// A project with the chain pipeline on a fresh schema of `PIPEC_TEST_POSTGRES`; `None`
/// (the test says it is skipped) without one.
fn postgres(tag: &str) -> Option<Ctx> {
    let store = common::pg_schema::postgres_store(tag)?;
    Some(Ctx {
        p: chain_project(tag),
        store,
    })
}

fn chain_project(tag: &str) -> Project {
    let p = Project::new(tag);
    p.write("chain.pipe", CHAIN);
    p.script("step.sh", STEP);
    p
}

/// A worker on the project's store, its stderr in `worker-N.log`, once it has said it
/// started (its signal handlers are in place by then, so a test may stop it at once).
fn worker(p: &Ctx, n: u32, extra: &[&str]) -> Child {
    worker_with_env(p, n, extra, &[])
}

/// [`worker`] with these variables in its environment.
fn worker_with_env(p: &Ctx, n: u32, extra: &[&str], env: &[(&str, &str)]) -> Child {
    let name = format!("worker-{n}.log");
    let log = std::fs::File::create(p.dir.join(&name)).expect("log");
    let mut args = vec!["worker", "--verbose", "--poll", "200ms"];
    args.extend_from_slice(extra);
    let mut child = p
        .cmd(&args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .expect("pipec worker starts");
    let start = Instant::now();
    while !p.read(&name).contains(" at once") {
        let exited = child.try_wait().expect("wait");
        assert!(
            exited.is_none() && start.elapsed() < WITHIN,
            "the worker did not start: {exited:?}\n{}",
            p.read(&name)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

fn signal(child: &Child, sig: &str) {
    let status = std::process::Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
}

/// Waits for the child to exit; its exit code.
fn wait_exit(child: &mut Child, within: Duration) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("wait") {
            return s.code().unwrap_or(-1);
        }
        if start.elapsed() > within {
            let _ = child.kill();
            panic!("the worker did not exit within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn submit(p: &Ctx, file: &str, inputs: &[&str]) -> String {
    let mut args = vec!["run", file, "--submit"];
    for i in inputs {
        args.extend_from_slice(&["--input", i]);
    }
    let out = p.run(&args);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let id = stdout(&out).trim().to_string();
    assert_eq!(id.len(), 26, "the id alone on stdout: {id:?}");
    id
}

fn show(p: &Ctx, thread: &str) -> serde_json::Value {
    let out = p.run(&["show", thread, "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    json(&stdout(&out))
}

fn status(p: &Ctx, thread: &str) -> String {
    show(p, thread)["status"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn wait_status(p: &Ctx, thread: &str, want: &str) {
    let start = Instant::now();
    loop {
        let s = status(p, thread);
        if s == want {
            return;
        }
        assert!(
            start.elapsed() < WITHIN,
            "thread {thread} is {s}, not {want}\n{}",
            worker_logs(p)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn worker_logs(p: &Ctx) -> String {
    (1..=4)
        .map(|n| p.read(&format!("worker-{n}.log")))
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// The outputs of a thread as a resume of a completed thread prints them.
fn outputs(p: &Ctx, thread: &str) -> serde_json::Value {
    let out = p.run(&["resume", thread]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    json(&stdout(&out))
}

/// How often each step's effect ran for the thread.
fn effects(p: &Ctx, thread: &str, step: &str) -> usize {
    p.read("effects.log")
        .lines()
        .filter(|l| *l == format!("{thread} {step}"))
        .count()
}

fn uninterrupted(p: &Ctx, seed: &str) -> serde_json::Value {
    let out = p.run(&["run", "chain.pipe", "--input", seed]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    json(&stdout(&out))
}

fn a_submitted_thread_is_run_by_a_worker_to_the_outputs_of_run(p: &Ctx) {
    let expected = uninterrupted(p, "seed=5");
    assert_eq!(expected, serde_json::json!({ "last": { "v": 8 } }));
    let thread = submit(p, "chain.pipe", &["seed=5"]);
    // Queued: stored with its plan and inputs, nothing run, no holder.
    assert_eq!(status(p, &thread), "queued");
    let runs = stdout(&p.run(&["runs", "--status", "queued"]));
    assert!(runs.contains(&thread) && runs.contains("queued"), "{runs}");
    assert_eq!(effects(p, &thread, "a"), 0, "a submit runs nothing");
    let mut w = worker(p, 1, &[]);
    wait_status(p, &thread, "completed");
    assert_eq!(outputs(p, &thread), expected);
    for step in ["a", "b", "c"] {
        assert_eq!(effects(p, &thread, step), 1, "{step} ran once");
    }
    signal(&w, "-TERM");
    assert_eq!(wait_exit(&mut w, WITHIN), 0);
    let log = p.read("worker-1.log");
    assert!(log.contains(&format!("took {thread}")), "{log}");
    assert!(log.contains(&format!("completed {thread}")), "{log}");
}

fn a_gate_answered_from_another_process_is_picked_up_by_a_waiting_worker(p: &Ctx) {
    p.write("gated.pipe", GATED);
    p.script("scripts/fetch.sh", FETCH);
    p.script(
        "scripts/effect.sh",
        "#!/bin/sh\ncat >/dev/null\necho \"$PIPEC_THREAD $PIPEC_NODE\" >> effects.log\nprintf '{\"done\":true,\"id\":\"x\"}'\n",
    );
    let thread = submit(p, "gated.pipe", &["id=A7"]);
    let mut w = worker(p, 1, &[]);
    wait_status(p, &thread, "paused");
    // While the worker waits, another process answers; no one holds the thread.
    let out = p.run(&["answer", &thread, r#"review={"approved":true}"#]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    wait_status(p, &thread, "completed");
    assert_eq!(
        outputs(p, &thread),
        serde_json::json!({ "summary": { "done": true, "id": "A7" } })
    );
    assert_eq!(p.read("effects.log"), format!("{thread} apply\n"));
    signal(&w, "-INT");
    assert_eq!(wait_exit(&mut w, WITHIN), 0);
    let log = p.read("worker-1.log");
    assert!(log.contains(&format!("paused {thread}")), "{log}");
    assert!(log.contains("a gate was answered"), "{log}");
}

fn concurrency_runs_threads_at_once(p: &Ctx) {
    p.write("hold.a", "");
    let t1 = submit(p, "chain.pipe", &["seed=1"]);
    let t2 = submit(p, "chain.pipe", &["seed=2"]);
    let mut w = worker(p, 1, &["--concurrency", "2"]);
    // Both threads are inside `a` at once: neither can leave it before `release.a`.
    wait_for(&p.dir.join(format!("started.{t1}.a")), WITHIN);
    wait_for(&p.dir.join(format!("started.{t2}.a")), WITHIN);
    assert_eq!(status(p, &t1), "running");
    assert_eq!(status(p, &t2), "running");
    // `runs` names the holder of each: this worker.
    let runs = stdout(&p.run(&["runs"]));
    let pid = format!("{}@", w.id());
    assert_eq!(
        runs.lines().filter(|l| l.contains(&pid)).count(),
        2,
        "{runs}"
    );
    p.write("release.a", "");
    wait_status(p, &t1, "completed");
    wait_status(p, &t2, "completed");
    assert_eq!(outputs(p, &t1)["last"]["v"], 4);
    assert_eq!(outputs(p, &t2)["last"]["v"], 5);
    signal(&w, "-TERM");
    assert_eq!(wait_exit(&mut w, WITHIN), 0);
}

fn sigterm_finishes_the_step_releases_the_thread_and_another_worker_goes_on(p: &Ctx) {
    let expected = uninterrupted(p, "seed=3");
    p.write("hold.b", "");
    let thread = submit(p, "chain.pipe", &["seed=3"]);
    let mut w1 = worker(p, 1, &[]);
    wait_for(&p.dir.join(format!("started.{thread}.b")), WITHIN);
    signal(&w1, "-TERM");
    // The step in flight is finished, not abandoned: the worker waits for it.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        w1.try_wait().expect("wait").is_none(),
        "the worker stays until its step ends"
    );
    p.write("release.b", "");
    assert_eq!(wait_exit(&mut w1, WITHIN), 0, "{}", worker_logs(p));
    // Released: queued again, no holder, nothing after `b` started.
    let shown = show(p, &thread);
    assert_eq!(shown["status"], "queued", "{shown}");
    let runs = stdout(&p.run(&["runs"]));
    assert!(!runs.contains(&format!("{}@", w1.id())), "{runs}");
    assert_eq!(effects(p, &thread, "b"), 1);
    assert_eq!(effects(p, &thread, "c"), 0);
    let log = p.read("worker-1.log");
    assert!(log.contains(&format!("released {thread}")), "{log}");
    // Another worker takes it over and repeats nothing.
    let mut w2 = worker(p, 2, &[]);
    wait_status(p, &thread, "completed");
    assert_eq!(outputs(p, &thread), expected);
    for step in ["a", "b", "c"] {
        assert_eq!(effects(p, &thread, step), 1, "{step} ran once");
    }
    signal(&w2, "-TERM");
    assert_eq!(wait_exit(&mut w2, WITHIN), 0);
}

fn a_second_signal_stops_at_once_and_the_thread_is_taken_over(p: &Ctx) {
    p.write("hold.b", "");
    let thread = submit(p, "chain.pipe", &["seed=3"]);
    let mut w1 = worker(p, 1, &[]);
    wait_for(&p.dir.join(format!("started.{thread}.b")), WITHIN);
    signal(&w1, "-TERM");
    std::thread::sleep(Duration::from_millis(100));
    signal(&w1, "-TERM");
    assert_eq!(wait_exit(&mut w1, WITHIN), 128 + 15);
    // The lock went with the process; `b` is idempotent and runs again elsewhere.
    p.write("release.b", "");
    let mut w2 = worker(p, 2, &[]);
    wait_status(p, &thread, "completed");
    assert_eq!(effects(p, &thread, "a"), 1);
    assert_eq!(effects(p, &thread, "b"), 1);
    signal(&w2, "-TERM");
    assert_eq!(wait_exit(&mut w2, WITHIN), 0);
}

fn a_worker_killed_with_sigkill_is_taken_over_without_repeating_a_finished_effect(p: &Ctx) {
    let expected = uninterrupted(p, "seed=7");
    p.write("hold.b", "");
    let thread = submit(p, "chain.pipe", &["seed=7"]);
    let mut w1 = worker(p, 1, &[]);
    wait_for(&p.dir.join(format!("started.{thread}.b")), WITHIN);
    w1.kill().expect("kill -9");
    let _ = w1.wait();
    // Running, with its holder gone (on PostgreSQL once its lease expired).
    let start = Instant::now();
    loop {
        let runs = stdout(&p.run(&["runs"]));
        if runs.contains("stale") {
            break;
        }
        assert!(start.elapsed() < WITHIN, "{runs}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut w2 = worker(p, 2, &[]);
    // `b` starts again under the new worker (it is idempotent).
    let log2 = p.dir.join("worker-2.log");
    let start = Instant::now();
    while !std::fs::read_to_string(&log2)
        .unwrap_or_default()
        .contains("its holder is gone")
    {
        assert!(start.elapsed() < WITHIN, "{}", worker_logs(p));
        std::thread::sleep(Duration::from_millis(20));
    }
    p.write("release.b", "");
    wait_status(p, &thread, "completed");
    assert_eq!(outputs(p, &thread), expected);
    assert_eq!(
        effects(p, &thread, "a"),
        1,
        "a finished effect is not repeated"
    );
    assert_eq!(effects(p, &thread, "b"), 1);
    assert_eq!(effects(p, &thread, "c"), 1);
    signal(&w2, "-TERM");
    assert_eq!(wait_exit(&mut w2, WITHIN), 0);
}

#[test]
fn unknown_flags_and_bad_values_are_refused() {
    let p = chain_project("flags");
    let out = p.run(&["worker", "--concurency", "2"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("a similar argument exists: '--concurrency'"),
        "{}",
        stderr(&out)
    );
    let out = p.run(&["worker", "--concurrency", "0"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let out = p.run(&["worker", "--poll", "soon"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("not a duration"), "{}", stderr(&out));
    let out = p.run(&["worker", "--pipelines", "nowhere"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("no such folder"), "{}", stderr(&out));
    // A thread names its pipeline, not its file: two files of one name are refused.
    p.write("two/a/job.pipe", SERVED_JOB);
    p.write("two/b/job.pipe", SERVED_JOB);
    let out = p.run(&["worker", "--pipelines", "two"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("both define the pipeline `job`"),
        "{}",
        stderr(&out)
    );
    // No store yet: a worker creates none.
    let out = p.run(&["worker"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(!p.store().exists());
    assert_eq!(code(&p.run(&["run", "chain.pipe", "--input", "seed=1"])), 0);
    let out = p.run(&["worker", "--store", ".pipec/run.redb"]);
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("did you mean `--store .pipec/runs.redb`?"),
        "{}",
        stderr(&out)
    );
    let out = p.run(&["runs", "--status", "queud"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("did you mean `queued`?"),
        "{}",
        stderr(&out)
    );
}

fn pipelines_limits_a_worker_to_a_folders_pipelines(p: &Ctx) {
    p.write(
        "other/other.pipe",
        "input seed: int\n\nnode one(seed: int = input.seed) -> { v: int } {\n  return = { v: seed }\n}\n\noutput one = one\n",
    );
    let other = submit(p, "other/other.pipe", &["seed=1"]);
    let chain = submit(p, "chain.pipe", &["seed=1"]);
    let mut w = worker(p, 1, &["--pipelines", "other"]);
    wait_status(p, &other, "completed");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(status(p, &chain), "queued", "not a pipeline of `other/`");
    signal(&w, "-TERM");
    assert_eq!(wait_exit(&mut w, WITHIN), 0);
}

/// The pipeline `job` a worker serves from `served/`: one step through the project's
/// `step.sh` (a path from the file's folder).
const SERVED_JOB: &str = r#"type V {
  v: int
}

input seed: int

node a(seed: int = input.seed) -> V {
  exec = ["../step.sh", "a"]
}

output last = a
"#;

/// Another file of the same name, `job`, as anyone who can submit could write it: its
/// step runs a command of its own choosing. `inputs` are its input declarations.
fn foreign_job(inputs: &str) -> String {
    format!(
        r#"type V {{
  v: int
}}

{inputs}

node a(seed: int = input.seed) -> V {{
  exec = ["sh", "-c", "cat >/dev/null; touch foreign.ran; echo '{{\"v\":99}}'"]
}}

output last = a
"#
    )
}

/// A worker serving a folder runs only the plans it compiled from it: a thread submitted
/// from another file of the same pipeline name, which the plan-change rules refuse (it
/// has an input the worker's `job` does not declare), fails with R0407, recorded on the
/// thread (its status, its error, a `thread_failed` event) and in the worker's log, and
/// nothing of it runs. (Before, the worker ran the plan stored with the thread: its
/// command ran on the worker's machine.)
fn a_worker_serving_a_folder_refuses_a_thread_of_a_plan_it_did_not_compile(p: &Ctx) {
    // One project root for both folders: `step.sh` and the effects are there.
    p.write("pipec.toml", "");
    p.write("served/job.pipe", SERVED_JOB);
    p.write(
        "elsewhere/job.pipe",
        &foreign_job("input seed: int\n\ninput note: string"),
    );
    let thread = submit(p, "elsewhere/job.pipe", &["seed=1", "note=hi"]);
    let mut w = worker(p, 1, &["--pipelines", "served"]);
    wait_status(p, &thread, "failed");
    let shown = show(p, &thread);
    assert_eq!(shown["error"]["code"], "R0407", "{shown}");
    let message = shown["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("note") && message.contains("nothing of it ran"),
        "{message}"
    );
    assert!(shown["holder"].is_null(), "nobody holds it: {shown}");
    let events = stdout(&p.run(&["show", &thread, "--events"]));
    assert!(
        events.contains("thread_failed") && events.contains("R0407"),
        "{events}"
    );
    assert!(!events.contains("node_started"), "nothing ran: {events}");
    let text = stdout(&p.run(&["show", &thread]));
    assert!(text.contains("error[R0407]"), "{text}");
    let runs = stdout(&p.run(&["runs", "--status", "failed"]));
    assert!(runs.contains(&thread), "{runs}");
    assert!(
        !p.dir.join("foreign.ran").exists(),
        "the foreign command ran"
    );
    assert!(worker_logs(p).contains("R0407"), "{}", worker_logs(p));
    signal(&w, "-TERM");
    assert_eq!(wait_exit(&mut w, WITHIN), 0);
    assert!(
        !p.dir.join("foreign.ran").exists(),
        "the foreign command ran"
    );
}

/// A thread submitted from another file of a served pipeline that the plan-change rules
/// let through (same inputs, nothing finished) runs under the worker's own plan, as
/// `pipec resume --plan` would run it: the worker's step runs, the thread's own command
/// never does, and the thread records the plan it took (`plan_upgraded`), which the store
/// now keeps.
fn a_worker_serving_a_folder_runs_another_plan_of_its_pipeline_under_its_own(p: &Ctx) {
    p.write("pipec.toml", "");
    p.write("served/job.pipe", SERVED_JOB);
    p.write("elsewhere/job.pipe", &foreign_job("input seed: int"));
    let thread = submit(p, "elsewhere/job.pipe", &["seed=1"]);
    let mut w = worker(p, 1, &["--pipelines", "served"]);
    wait_status(p, &thread, "completed");
    assert_eq!(effects(p, &thread, "a"), 1, "the worker's step ran");
    assert!(
        !p.dir.join("foreign.ran").exists(),
        "the foreign command ran"
    );
    let events = stdout(&p.run(&["show", &thread, "--events"]));
    assert!(events.contains("plan_upgraded"), "{events}");
    // The outputs as the worker's plan computed them, read with the plan the store
    // keeps for the thread (its own file is another plan now).
    let out = p.run(&["resume", &thread]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        json(&stdout(&out)),
        serde_json::json!({ "last": { "v": 2 } })
    );
    signal(&w, "-TERM");
    assert_eq!(wait_exit(&mut w, WITHIN), 0);
}

/// A pipeline whose node reads a configuration value and a scripted model; served from
/// `served/`, its own project.
const CONFIGURED_JOB: &str = r#"model fast {
  provider = "scripted"
  replies = "replies.json"
}

input seed: int

node a(seed: int = input.seed, target: string = env("JOB_TARGET", default: "unset")) -> { target: string } {
  return = { target: target }
}

think b(seed: int = input.seed) -> { v: int } {
  model = fast
  prompt = "Give {{ seed }}"
}

output target = a
output answer = b
"#;

/// A worker serving a folder resumes with its own configuration: an `env()` value is
/// read from the worker's environment, not taken from the thread that whoever
/// submitted it recorded, so a submitter cannot choose where a served pipeline's
/// requests (and the secrets sent with them) go. The value it used is what the thread
/// records.
fn a_worker_serving_a_folder_uses_its_own_configuration_not_the_submitters(p: &Ctx) {
    p.write("served/pipec.toml", "");
    p.write("served/job.pipe", CONFIGURED_JOB);
    p.write("served/replies.json", r#"{"b": [{"json": {"v": 1}}]}"#);
    let out = p
        .cmd(&["run", "served/job.pipe", "--submit", "--input", "seed=1"])
        .env("JOB_TARGET", "https://attacker.example")
        .output()
        .expect("pipec runs");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let thread = stdout(&out).trim().to_string();
    let mut w = worker_with_env(
        p,
        1,
        &["--pipelines", "served"],
        &[("JOB_TARGET", "https://models.internal")],
    );
    wait_status(p, &thread, "completed");
    let out = p.run(&["resume", &thread]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        json(&stdout(&out))["target"]["target"],
        "https://models.internal"
    );
    let shown = show(p, &thread);
    assert_eq!(
        shown["config"]["JOB_TARGET"], "https://models.internal",
        "{shown}"
    );
    signal(&w, "-TERM");
    assert_eq!(wait_exit(&mut w, WITHIN), 0);
}

/// A worker serving a folder reads scripted replies only from it: a thread submitted
/// with `--model NAME=scripted:FILE` naming a file elsewhere on the worker's machine
/// fails with R0009, recorded on the thread, and nothing of it runs.
fn a_worker_serving_a_folder_refuses_replies_from_outside_it(p: &Ctx) {
    p.write("served/pipec.toml", "");
    p.write("served/job.pipe", CONFIGURED_JOB);
    p.write("served/replies.json", r#"{"b": [{"json": {"v": 1}}]}"#);
    p.write("elsewhere/replies.json", r#"{"b": [{"json": {"v": 666}}]}"#);
    let out = p.run(&[
        "run",
        "served/job.pipe",
        "--submit",
        "--input",
        "seed=1",
        "--model",
        "fast=scripted:elsewhere/replies.json",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let thread = stdout(&out).trim().to_string();
    let mut w = worker(p, 1, &["--pipelines", "served"]);
    wait_status(p, &thread, "failed");
    let shown = show(p, &thread);
    assert_eq!(shown["error"]["code"], "R0009", "{shown}");
    let message = shown["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("elsewhere/replies.json") && message.contains("nothing of it ran"),
        "{message}"
    );
    let events = stdout(&p.run(&["show", &thread, "--events"]));
    assert!(!events.contains("node_started"), "nothing ran: {events}");
    // A replies file inside the folder is taken.
    let out = p.run(&[
        "run",
        "served/job.pipe",
        "--submit",
        "--input",
        "seed=2",
        "--model",
        "fast=scripted:served/replies.json",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let inside = stdout(&out).trim().to_string();
    wait_status(p, &inside, "completed");
    signal(&w, "-TERM");
    assert_eq!(wait_exit(&mut w, WITHIN), 0);
}

/// `job` with a gate between its two steps; `a` and `b` are the commands of its steps.
fn gated_job(a: &str, b: &str) -> String {
    format!(
        r#"type V {{
  v: int
}}

type Approval {{
  approved: bool
}}

input seed: int

node a(seed: int = input.seed) -> V {{
  exec = {a}
}}

gate review(prev: V = a) -> Approval {{
  message = "Go on?"
}}

node b(ack: Approval = review, prev: V = a) -> V {{
  exec = {b}
}}

output last = b
"#
    )
}

/// A thread of another plan of a served pipeline that has a finished node the worker's
/// plan defines otherwise is not run on: the plan-change rules need a person (R0401), so
/// the worker fails it with the refusal and what to type, runs none of its steps, and
/// the person's `pipec resume --plan ... --keep` then goes on under the served plan.
fn a_worker_serving_a_folder_refuses_a_thread_whose_finished_node_its_plan_changed(p: &Ctx) {
    p.write("pipec.toml", "");
    p.write(
        "served/job.pipe",
        &gated_job(r#"["../step.sh", "a"]"#, r#"["../step.sh", "b"]"#),
    );
    let foreign = |step: &str| {
        format!(r#"["sh", "-c", "cat >/dev/null; touch foreign.{step}; echo '{{\"v\":1}}'"]"#)
    };
    p.write(
        "elsewhere/job.pipe",
        &gated_job(&foreign("a"), &foreign("b")),
    );
    // Its first step runs where it was started, and it waits at the gate.
    let out = p.run(&["run", "elsewhere/job.pipe", "--input", "seed=1"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let thread = thread_of(&format!("{}{}", stdout(&out), stderr(&out))).expect("paused");
    assert!(p.dir.join("foreign.a").exists());
    let out = p.run(&["answer", &thread, r#"review={"approved": true}"#]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let mut w = worker(p, 1, &["--pipelines", "served"]);
    wait_status(p, &thread, "failed");
    let shown = show(p, &thread);
    assert_eq!(shown["error"]["code"], "R0401", "{shown}");
    let help = shown["error"]["help"].as_str().unwrap_or_default();
    assert!(
        help.contains("--keep a") && help.contains("--plan") && help.contains("served/job.pipe"),
        "{help}"
    );
    assert!(
        !p.dir.join("foreign.b").exists(),
        "the thread's own step ran"
    );
    assert_eq!(effects(p, &thread, "b"), 0, "nothing ran");
    signal(&w, "-TERM");
    assert_eq!(wait_exit(&mut w, WITHIN), 0);
    let out = p.run(&[
        "resume",
        &thread,
        "--plan",
        "served/job.pipe",
        "--keep",
        "a",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(effects(p, &thread, "b"), 1, "the served step ran");
    assert!(
        !p.dir.join("foreign.b").exists(),
        "the thread's own step ran"
    );
}

/// A cancel asked while a killed worker's thread still looks held (on PostgreSQL, until
/// its lease expires) is only a request; the next worker takes the thread once its holder
/// is gone and carries the cancel out, rather than leaving it running for ever.
fn a_cancel_asked_of_a_killed_workers_thread_is_carried_out_by_the_next_worker(p: &Ctx) {
    p.write("hold.b", "");
    let thread = submit(p, "chain.pipe", &["seed=3"]);
    let mut w1 = worker(p, 1, &[]);
    wait_for(&p.dir.join(format!("started.{thread}.b")), WITHIN);
    w1.kill().expect("kill -9");
    let _ = w1.wait();
    let out = p.run(&["cancel", &thread]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let mut w2 = worker(p, 2, &[]);
    wait_status(p, &thread, "cancelled");
    assert_eq!(effects(p, &thread, "c"), 0, "nothing ran after the cancel");
    signal(&w2, "-TERM");
    assert_eq!(wait_exit(&mut w2, WITHIN), 0);
}

/// A thread this worker cannot run (a secret its machine lacks) is given back as it was
/// taken: still queued, nothing run, nothing held; a worker that has the secret runs it.
fn a_thread_the_worker_cannot_run_is_given_back_as_it_was(p: &Ctx) {
    p.write(
        "keyed.pipe",
        "node a(k: string = secret(\"WORKER_KEY\")) -> { v: string } {\n  exec = [\"./keyed.sh\"]\n  idempotent = true\n}\n\noutput a = a\n",
    );
    p.script(
        "keyed.sh",
        "#!/bin/sh\ncat >/dev/null\necho \"$PIPEC_THREAD a\" >> effects.log\nprintf '{\"v\":\"ok\"}'\n",
    );
    let out = p
        .cmd(&["run", "keyed.pipe", "--submit"])
        .env("WORKER_KEY", "k-1")
        .stdin(Stdio::null())
        .output()
        .expect("pipec runs");
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let thread = stdout(&out).trim().to_string();
    let spawn = |n: u32, key: Option<&str>| {
        let log = std::fs::File::create(p.dir.join(format!("worker-{n}.log"))).expect("log");
        let mut c = p.cmd(&["worker", "--verbose", "--poll", "200ms"]);
        match key {
            Some(k) => c.env("WORKER_KEY", k),
            None => c.env_remove("WORKER_KEY"),
        };
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("pipec worker starts")
    };
    let mut w1 = spawn(1, None);
    let start = Instant::now();
    while !p.read("worker-1.log").contains("WORKER_KEY") {
        assert!(start.elapsed() < WITHIN, "{}", worker_logs(p));
        std::thread::sleep(Duration::from_millis(50));
    }
    let shown = show(p, &thread);
    assert_eq!(shown["status"], "queued", "{shown}");
    assert!(shown["holder"].is_null(), "nobody holds it: {shown}");
    assert_eq!(effects(p, &thread, "a"), 0);
    signal(&w1, "-TERM");
    assert_eq!(wait_exit(&mut w1, WITHIN), 0);
    let mut w2 = spawn(2, Some("k-2"));
    wait_status(p, &thread, "completed");
    assert_eq!(effects(p, &thread, "a"), 1);
    signal(&w2, "-TERM");
    assert_eq!(wait_exit(&mut w2, WITHIN), 0);
}

/// A SIGTERM sent the moment a worker says it started stops it gracefully (exit 0, its
/// stopping line): the handlers are in place before that line, not installed by a task
/// that may run only after the worker took its first threads.
#[allow(unsafe_code)] // kill(2): std sends no signal but SIGKILL.
fn a_sigterm_right_after_the_start_line_stops_the_worker_gracefully(p: &Ctx) {
    use std::io::BufRead;
    submit(p, "chain.pipe", &["seed=1"]);
    for round in 0..5 {
        let mut w = p
            .cmd(&["worker", "--poll", "200ms"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("pipec worker starts");
        let mut lines = std::io::BufReader::new(w.stderr.take().expect("stderr")).lines();
        let started = lines.next().expect("a first line").expect("stderr is text");
        assert!(started.contains(" at once"), "{started}");
        // At once, without starting a `kill` process.
        let pid = libc::pid_t::try_from(w.id()).expect("pid");
        // SAFETY: kill(2) with a live child's pid and a signal number reads no memory.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        assert_eq!(
            wait_exit(&mut w, WITHIN),
            0,
            "round {round}: {started}\n{}",
            rest.join("\n")
        );
        assert!(
            rest.iter().any(|l| l.contains("stopping (signal 15)")),
            "round {round}: {}",
            rest.join("\n")
        );
    }
}

macro_rules! on_every_store {
    ($($case:ident),* $(,)?) => {
        mod on_redb {
            $(
                #[test]
                fn $case() {
                    super::$case(&super::redb(stringify!($case)));
                }
            )*
        }
        mod on_postgres {
            $(
                #[test]
                fn $case() {
                    if let Some(ctx) = super::postgres(stringify!($case)) {
                        super::$case(&ctx);
                    }
                }
            )*
        }
    };
}

on_every_store!(
    a_worker_serving_a_folder_uses_its_own_configuration_not_the_submitters,
    a_worker_serving_a_folder_refuses_replies_from_outside_it,
    a_submitted_thread_is_run_by_a_worker_to_the_outputs_of_run,
    a_gate_answered_from_another_process_is_picked_up_by_a_waiting_worker,
    concurrency_runs_threads_at_once,
    sigterm_finishes_the_step_releases_the_thread_and_another_worker_goes_on,
    a_second_signal_stops_at_once_and_the_thread_is_taken_over,
    a_worker_killed_with_sigkill_is_taken_over_without_repeating_a_finished_effect,
    pipelines_limits_a_worker_to_a_folders_pipelines,
    a_worker_serving_a_folder_refuses_a_thread_of_a_plan_it_did_not_compile,
    a_worker_serving_a_folder_runs_another_plan_of_its_pipeline_under_its_own,
    a_worker_serving_a_folder_refuses_a_thread_whose_finished_node_its_plan_changed,
    a_cancel_asked_of_a_killed_workers_thread_is_carried_out_by_the_next_worker,
    a_thread_the_worker_cannot_run_is_given_back_as_it_was,
    a_sigterm_right_after_the_start_line_stops_the_worker_gracefully,
);

/// On PostgreSQL an answer given anywhere wakes a waiting worker through `LISTEN/NOTIFY`,
/// not its poll: with the poll at a minute, the thread's next attempt starts within
/// 100 ms (the median of five) of the commit that answered its gate, and every time
/// within a second (both times are the events' commit stamps).
#[test]
fn on_postgres_an_answer_wakes_a_waiting_worker_within_100_ms() {
    let Some(p) = postgres("an_answer_wakes_a_waiting_worker") else {
        return;
    };
    p.write("gated.pipe", GATED);
    p.script("scripts/fetch.sh", FETCH);
    p.script(
        "scripts/effect.sh",
        "#!/bin/sh\ncat >/dev/null\nprintf '{\"done\":true,\"id\":\"x\"}'\n",
    );
    // The first submit makes the store the worker opens.
    let mut next = Some(submit(&p, "gated.pipe", &["id=A0"]));
    let log = std::fs::File::create(p.dir.join("worker-1.log")).expect("log");
    let mut w = p
        .cmd(&["worker", "--verbose", "--poll", "60s"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .expect("pipec worker starts");
    let mut gaps = Vec::new();
    for round in 0..5 {
        // Later ones are submitted while the worker waits: their notify wakes it, too.
        let thread = next
            .take()
            .unwrap_or_else(|| submit(&p, "gated.pipe", &[&format!("id=A{round}")]));
        wait_status(&p, &thread, "paused");
        // Let the worker give the thread back and go back to waiting.
        std::thread::sleep(Duration::from_millis(300));
        let out = p.run(&["answer", &thread, r#"review={"approved":true}"#]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        wait_status(&p, &thread, "completed");
        let events: Vec<serde_json::Value> = stdout(&p.run(&["show", &thread, "--events"]))
            .lines()
            .map(json)
            .collect();
        let answered = events
            .iter()
            .find(|e| e["type"] == "gate_answered")
            .expect("gate_answered")["ts"]
            .as_u64()
            .unwrap_or_default();
        let resumed = events
            .iter()
            .filter(|e| e["type"] == "attempt_started")
            .filter_map(|e| e["ts"].as_u64())
            .find(|ts| *ts >= answered)
            .unwrap_or_else(|| panic!("no attempt after the answer: {events:?}"));
        gaps.push(resumed - answered);
    }
    signal(&w, "-TERM");
    assert_eq!(wait_exit(&mut w, WITHIN), 0);
    eprintln!("answer → next attempt, ms: {gaps:?}");
    // Without a notify the worker would wake only at its poll, a minute on.
    assert!(
        gaps.iter().all(|g| *g < 1000),
        "answer → next attempt, ms: {gaps:?}\n{}",
        p.read("worker-1.log")
    );
    // Tests run side by side on a debug build here, so the goal is held to the median.
    let mut sorted = gaps.clone();
    sorted.sort_unstable();
    assert!(sorted[sorted.len() / 2] < 100, "median of {gaps:?}");
}
