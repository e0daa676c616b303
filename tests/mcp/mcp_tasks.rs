//! Tool calls a server runs as MCP tasks, against real servers: the TypeScript reference
//! server `server-everything` (2025-11-25's tasks: `simulate-research-query` runs only as
//! one) and `tests/interop/task_server.py` (2026-07-28's `io.modelcontextprotocol/tasks`
//! extension, its tasks kept in files so they outlive a process, as a hosted server's
//! do). A task's id is journaled before it is polled: a `kill -9` while polling is
//! followed by a resume that polls the same task and never calls the tool again.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::npm::{EVERYTHING, reference_server};
use crate::common::python::python;
use crate::common::{Project, code, json, stderr, stdout};

fn pipeline(dir: &Path, seconds: f64) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/task_server.py");
    let args = [
        script.display().to_string(),
        "--state".to_string(),
        dir.join("tasks").display().to_string(),
        "--log".to_string(),
        dir.join("tasks.log").display().to_string(),
    ];
    format!(
        r#"type Computed {{
  label: string
  seconds: float
}}

server tasks {{
  command = {python:?}
  args = {args:?}
}}

tool slow_compute(seconds: float, label: string) -> Computed from tasks

act computed() -> Computed {{
  call = slow_compute(seconds: {seconds:?}, label: "ledger")
}}

output out: Computed = computed
"#,
        python = python(),
    )
}

/// What the task server logged: calls and polls.
fn logged(p: &Project) -> Vec<Value> {
    std::fs::read_to_string(p.dir.join("tasks.log"))
        .unwrap_or_default()
        .lines()
        .map(json)
        .collect()
}

fn calls(p: &Project) -> usize {
    logged(p)
        .iter()
        .filter(|e| e["method"] == "tools/call")
        .count()
}

/// The task ids polled, in order, without repeats.
fn polled(p: &Project) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for e in logged(p) {
        if e["method"] == "tasks/get"
            && let Some(id) = e["taskId"].as_str()
            && ids.last().is_none_or(|last| last != id)
        {
            ids.push(id.to_string());
        }
    }
    ids
}

/// Starts `pipec run`, waits until the call became a task and is being polled, and kills
/// the process with SIGKILL. Returns the thread.
fn killed_while_polling(p: &Project) -> String {
    let mut run = p
        .cmd(&["run", "compute.pipe"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("pipec run starts");
    let started = Instant::now();
    while polled(p).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the call never became a task: {:?}",
            logged(p)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let runs = p.run(&["runs", "--json"]);
    let thread = json(&stdout(&runs))[0]["id"]
        .as_str()
        .expect("a thread")
        .to_string();
    p.kill_holder(&mut run, &thread);
    thread
}

#[test]
fn a_poll_killed_by_sigkill_resumes_polling_the_same_task_without_calling_again() {
    let p = Project::new("task-kill");
    p.write("compute.pipe", &pipeline(&p.dir, 3.0));
    let thread = killed_while_polling(&p);
    assert_eq!(calls(&p), 1);
    let task = polled(&p)[0].clone();

    // The journal keeps the task with the call.
    let internal = json(&stdout(&p.run(&["show", &thread, "--json", "--internal"])));
    let rows = internal["calls"].as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 1, "{internal}");
    assert_eq!(rows[0]["record"]["state"], "tasked");
    assert_eq!(rows[0]["record"]["task"]["id"], task.as_str());

    let resumed = p.run(&["resume", &thread]);
    assert_eq!(code(&resumed), 0, "{}", stderr(&resumed));
    let out = json(&stdout(&resumed));
    assert_eq!(out["out"]["label"], "ledger");
    assert_eq!(calls(&p), 1, "the tool was called again: {:?}", logged(&p));
    assert_eq!(polled(&p), [task], "another task was polled");
}

#[test]
fn a_task_the_server_forgot_leaves_the_effect_to_a_person() {
    let p = Project::new("task-forgotten");
    p.write("compute.pipe", &pipeline(&p.dir, 30.0));
    let thread = killed_while_polling(&p);
    // The server lost its tasks (a restart without them, or their time ran out).
    std::fs::remove_dir_all(p.dir.join("tasks")).expect("the task files go");
    let resumed = p.run(&["resume", &thread]);
    let err = stderr(&resumed);
    assert_ne!(code(&resumed), 0, "{err}");
    assert!(err.contains("no longer tells about the task"), "{err}");
    assert!(err.contains("unknown"), "{err}");
    assert_eq!(calls(&p), 1, "the tool was called again: {:?}", logged(&p));
}

#[test]
fn a_task_required_tool_of_server_everything_completes() {
    let Some(server) = reference_server(EVERYTHING) else {
        return;
    };
    let p = Project::new("task-everything");
    let listed = p.run(&[
        "tools",
        "pull",
        "everything",
        "--command",
        &format!("{} stdio", server.display()),
    ]);
    assert_eq!(code(&listed), 0, "{}", stderr(&listed));
    let pulled = stdout(&listed);
    let research = &pulled[pulled
        .find("name = \"simulate-research-query\"")
        .expect("pulled")..];
    assert!(
        research[..research.find('}').unwrap_or(research.len())].contains("task = \"required\""),
        "{pulled}"
    );
    p.write(
        "research.pipe",
        &format!(
            r#"server everything {{
  command = {server:?}
  args = ["stdio"]
}}

tool research(topic: string) -> string from everything {{
  name = "simulate-research-query"
  task = "required"
}}

act report() -> string {{
  call = research(topic: "durable runs")
}}

output said: string = report
"#,
            server = server.display().to_string()
        ),
    );
    let run = p.run(&["run", "research.pipe"]);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    let said = json(&stdout(&run))["said"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(said.contains("# Research Report: durable runs"), "{said}");
    assert!(said.contains("Stage 4: Generating report"), "{said}");
}

/// A node whose `timeout` ends while its task is polled: the effect's outcome is unknown
/// and the thread waits for a person; `--retry-unfinished` follows the same task, kept
/// with the call, and never calls the tool again.
#[test]
fn a_timeout_while_polling_keeps_the_task_for_the_retry() {
    let p = Project::new("task-timeout");
    let text = pipeline(&p.dir, 2.0).replace(
        "  call = slow_compute(",
        "  timeout = 500ms\n  call = slow_compute(",
    );
    p.write("compute.pipe", &text);
    let run = p.run(&["run", "compute.pipe"]);
    let err = stderr(&run);
    assert_ne!(code(&run), 0, "{err}");
    assert!(err.contains("needs a decision"), "{err}");
    let task = polled(&p)[0].clone();
    let thread = crate::common::thread_of(&err).expect("a thread");
    let internal = json(&stdout(&p.run(&["show", &thread, "--json", "--internal"])));
    let row = &internal["calls"][0]["record"];
    assert_eq!(row["state"], "unknown", "{internal}");
    assert_eq!(row["task"]["id"], task.as_str(), "{internal}");

    std::thread::sleep(Duration::from_millis(2000));
    let text = p.read("compute.pipe").replace("  timeout = 500ms\n", "");
    p.write("compute.pipe", &text);
    let key = internal["calls"][0]["call"]
        .as_str()
        .expect("a key")
        .to_string();
    let resumed = p.run(&[
        "resume",
        &thread,
        "--retry-unfinished",
        &key,
        "--keep",
        "computed",
    ]);
    assert_eq!(code(&resumed), 0, "{}", stderr(&resumed));
    assert_eq!(json(&stdout(&resumed))["out"]["label"], "ledger");
    assert_eq!(calls(&p), 1, "the tool was called again: {:?}", logged(&p));
    assert_eq!(polled(&p), [task]);
}

/// `pipec cancel` of a thread whose call the server runs as a task: the server is asked
/// to cancel the task (`tasks/cancel`), and the call's outcome is unknown.
#[test]
fn cancelling_a_thread_cancels_the_task_its_call_became() {
    let p = Project::new("task-cancel");
    p.write("compute.pipe", &pipeline(&p.dir, 30.0));
    let mut run = p
        .cmd(&["run", "compute.pipe"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("pipec run starts");
    let started = Instant::now();
    while polled(&p).is_empty() {
        assert!(started.elapsed() < Duration::from_secs(30), "no task");
        std::thread::sleep(Duration::from_millis(50));
    }
    let task = polled(&p)[0].clone();
    let runs = p.run(&["runs", "--json"]);
    let thread = json(&stdout(&runs))[0]["id"]
        .as_str()
        .expect("a thread")
        .to_string();
    let cancel = p.run(&["cancel", &thread]);
    assert_eq!(code(&cancel), 0, "{}", stderr(&cancel));
    let status = run.wait().expect("the run ends");
    assert!(!status.success());
    let cancels: Vec<Value> = logged(&p)
        .into_iter()
        .filter(|e| e["method"] == "tasks/cancel")
        .collect();
    assert_eq!(cancels.len(), 1, "{:?}", logged(&p));
    assert_eq!(cancels[0]["taskId"], task.as_str());
    let internal = json(&stdout(&p.run(&["show", &thread, "--json", "--internal"])));
    assert_eq!(internal["status"], "cancelled", "{internal}");
    assert_eq!(
        internal["calls"][0]["record"]["state"], "unknown",
        "{internal}"
    );
}

/// A task that asks a person (`input_required`, 2026-07-28) waits at a gate like any
/// question; the answer, given from another process, goes to the same task with
/// `tasks/update`, and the tool is never called again.
#[test]
fn a_tasks_question_is_a_gate_and_its_answer_goes_to_the_same_task() {
    let p = Project::new("task-asks");
    let text = pipeline(&p.dir, 0.5)
        .replace("slow_compute(", "approved_compute(")
        .replace(
            "tool approved_compute(seconds: float, label: string) -> Computed from tasks",
            "type Approved {\n  label: string\n  approved: bool\n}\n\ntool approved_compute(seconds: float, label: string) -> Approved from tasks",
        )
        .replace("act computed() -> Computed", "act computed() -> Approved")
        .replace("output out: Computed", "output out: Approved")
        .replace("  args = ", "  elicitation = \"ask\"\n  args = ");
    p.write("compute.pipe", &text);
    let run = p.run(&["run", "compute.pipe"]);
    let err = format!("{}{}", stdout(&run), stderr(&run));
    assert_eq!(code(&run), 0, "{err}");
    assert!(err.contains("Compute ledger?"), "{err}");
    let thread = crate::common::thread_of(&err).expect("paused");
    let task = polled(&p)[0].clone();
    let internal = json(&stdout(&p.run(&["show", &thread, "--json", "--internal"])));
    assert_eq!(
        internal["calls"][0]["record"]["state"], "tasked",
        "{internal}"
    );

    let answered = p.run(&[
        "answer",
        &thread,
        r#"computed:g0:i0:ask1={"confirm": true}"#,
    ]);
    assert_eq!(code(&answered), 0, "{}", stderr(&answered));
    let resumed = p.run(&["resume", &thread]);
    assert_eq!(code(&resumed), 0, "{}", stderr(&resumed));
    assert_eq!(json(&stdout(&resumed))["out"]["approved"], true);
    assert_eq!(calls(&p), 1, "the tool was called again: {:?}", logged(&p));
    assert_eq!(polled(&p), [task]);
    let updates: Vec<Value> = logged(&p)
        .into_iter()
        .filter(|e| e["method"] == "tasks/update")
        .collect();
    assert_eq!(updates.len(), 1, "{updates:?}");
    assert_eq!(updates[0]["responses"]["confirm"]["action"], "accept");
}
