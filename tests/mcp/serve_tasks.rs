//! A served pipeline's runs as MCP tasks (the `io.modelcontextprotocol/tasks` extension),
//! over HTTP in the 2026-07-28 era. A client that declared the extension gets a task for a
//! run that outlives a moment, and follows it with `tasks/get`: working, then
//! `input_required` with the gates it can answer (answered with `tasks/update`, one at a
//! time or together), then completed with the call's result inlined, or cancelled by
//! `tasks/cancel`. A pipeline that requires tasks is refused (-32021) to other clients;
//! one that forbids them never makes one. pipec's own client follows a task to its end.

use std::time::{Duration, Instant};

use crate::common;

use common::serve_http::{call_2026, serve_http};
use common::{Project, code, stderr, stdout};
use serde_json::{Value, json};

const TOKEN: &str = "tasks-t0ken";

/// Works half a second, then asks two people at once.
const TWO: &str = r##"//! Prepares, then asks two people.

type Answer {
  name: string
  confirm: bool
}

node prepare() -> string {
  exec = ["sh", "-c", #"sleep 0.5; printf '"ready"'"#]
  idempotent = true
}

gate first(ready: string = prepare) -> Answer {
  message = "First?"
}

gate second(ready: string = prepare) -> Answer {
  message = "Second?"
}

output first = first
output second = second
"##;

/// Asks at once while another branch works on for a second and a half.
const BUSY: &str = r##"//! Asks while it works.

node work() -> string {
  exec = ["sh", "-c", #"sleep 1.5; printf '"worked"'"#]
  idempotent = true
}

gate ok() -> { confirm: bool } {
  message = "Go on?"
}

output work = work
output ok = ok
"##;

/// Sleeps as long as it is told.
const SLOW: &str = r##"//! Sleeps.

input seconds: int

node nap(seconds: int = input.seconds) -> string {
  exec = ["sh", "-c", #"s=$(sed -n 's/.*"seconds": *\([0-9]*\).*/\1/p'); sleep "$s"; printf '"slept %s"' "$s""#]
  idempotent = true
}

output slept = nap
"##;

/// Answers at once, and requires tasks.
const QUICK: &str = r##"//! Answers at once, as a task.

node answer() -> string {
  return = "done"
}

output answer = answer

serve {
  tool {
    task = "required"
  }
}
"##;

/// Sleeps too, but never as a task.
const SYNC: &str = r##"//! Sleeps, never as a task.

node nap() -> string {
  exec = ["sh", "-c", #"sleep 0.5; printf '"slept"'"#]
  idempotent = true
}

output slept = nap

serve {
  tool {
    task = "forbidden"
  }
}
"##;

fn tasks_caps() -> Value {
    json!({ "elicitation": { "form": {} }, "extensions": { "io.modelcontextprotocol/tasks": {} } })
}

fn project() -> Project {
    let p = Project::new("serve-tasks");
    p.write("two.pipe", TWO);
    p.write("slow.pipe", SLOW);
    p.write("quick.pipe", QUICK);
    p.write("sync.pipe", SYNC);
    p.write("busy.pipe", BUSY);
    p
}

struct Server {
    url: String,
}

impl Server {
    fn call(&self, method: &str, name: Option<&str>, params: Value, caps: Value) -> (u16, Value) {
        call_2026(&self.url, TOKEN, method, name, params, caps, &[])
    }

    fn tool(&self, tool: &str, arguments: Value) -> Value {
        let (status, answer) = self.call(
            "tools/call",
            Some(tool),
            json!({ "name": tool, "arguments": arguments }),
            tasks_caps(),
        );
        assert_eq!(status, 200, "{answer}");
        answer["result"].clone()
    }

    fn get(&self, id: &str) -> Value {
        let (status, answer) =
            self.call("tasks/get", Some(id), json!({ "taskId": id }), tasks_caps());
        assert_eq!(status, 200, "{answer}");
        answer["result"].clone()
    }

    /// Polls the task until `done` holds of it (at most 20 s).
    fn until(&self, id: &str, done: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let task = self.get(id);
            if done(&task) {
                return task;
            }
            assert!(start.elapsed() < Duration::from_secs(20), "never: {task}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn keys(task: &Value) -> Vec<String> {
    task["inputRequests"]
        .as_object()
        .map(|r| r.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn a_run_that_outlives_a_moment_is_a_task_whose_gates_tasks_update_answers() {
    let p = project();
    let (_server, url) = serve_http(
        &p.dir,
        &["two.pipe", "slow.pipe", "quick.pipe", "sync.pipe"],
        TOKEN,
    );
    let s = Server { url };

    // The server says it runs tasks.
    let (_, found) = s.call("server/discover", None, json!({}), json!({}));
    assert!(
        found["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"].is_object(),
        "{found}"
    );

    let created = s.tool("two", json!({}));
    assert_eq!(created["resultType"], "task", "{created}");
    assert_eq!(created["status"], "working", "{created}");
    let id = created["taskId"].as_str().expect("a task id").to_string();
    assert!(
        created["createdAt"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{created}"
    );
    // Created durably: the thread is the task.
    assert_eq!(p.show_json(&id)["thread"], id);

    let asking = s.until(&id, |t| keys(t).len() == 2);
    assert_eq!(asking["status"], "input_required", "{asking}");
    assert_eq!(keys(&asking), ["first", "second"]);
    assert_eq!(
        asking["inputRequests"]["first"]["method"], "elicitation/create",
        "{asking}"
    );
    assert_eq!(
        asking["inputRequests"]["first"]["params"]["message"], "First?",
        "{asking}"
    );

    // One answer (and one to nothing asked, ignored): the other stays asked.
    let (status, ack) = s.call(
        "tasks/update",
        Some(&id),
        json!({ "taskId": id, "inputResponses": {
            "first": { "action": "accept", "content": { "name": "ann", "confirm": true } },
            "nothing": { "action": "accept", "content": {} } } }),
        tasks_caps(),
    );
    assert_eq!(status, 200, "{ack}");
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    assert!(ack["result"].get("taskId").is_none(), "{ack}");
    let rest = s.get(&id);
    assert_eq!(rest["status"], "input_required", "{rest}");
    assert_eq!(keys(&rest), ["second"], "{rest}");

    // An answer that does not fit is refused, and changes nothing.
    let (_, wrong) = s.call(
        "tasks/update",
        Some(&id),
        json!({ "taskId": id, "inputResponses": {
            "second": { "action": "accept", "content": { "name": 5 } } } }),
        tasks_caps(),
    );
    assert_eq!(wrong["error"]["code"], -32602, "{wrong}");
    assert_eq!(keys(&s.get(&id)), ["second"]);

    s.call(
        "tasks/update",
        Some(&id),
        json!({ "taskId": id, "inputResponses": {
            "second": { "action": "accept", "content": { "name": "bo", "confirm": false } } } }),
        tasks_caps(),
    );
    let done = s.until(&id, |t| t["status"] == "completed");
    assert_eq!(
        done["result"]["structuredContent"],
        json!({ "first": { "name": "ann", "confirm": true }, "second": { "name": "bo", "confirm": false } }),
        "{done}"
    );
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(p.show_json(&id)["status"], "completed");
}

#[test]
fn a_task_is_cancelled_and_unknown_ones_are_invalid_params() {
    let p = project();
    let (_server, url) = serve_http(&p.dir, &["slow.pipe", "quick.pipe", "sync.pipe"], TOKEN);
    let s = Server { url };

    let created = s.tool("slow", json!({ "seconds": 30 }));
    let id = created["taskId"].as_str().expect("a task").to_string();
    assert_eq!(s.get(&id)["status"], "working");
    let (_, ack) = s.call(
        "tasks/cancel",
        Some(&id),
        json!({ "taskId": id }),
        tasks_caps(),
    );
    assert_eq!(ack["result"], json!({ "resultType": "complete" }), "{ack}");
    s.until(&id, |t| t["status"] == "cancelled");
    assert_eq!(p.show_json(&id)["status"], "cancelled");
    // Cancelling what ended is acknowledged the same.
    let (_, again) = s.call(
        "tasks/cancel",
        Some(&id),
        json!({ "taskId": id }),
        tasks_caps(),
    );
    assert_eq!(
        again["result"],
        json!({ "resultType": "complete" }),
        "{again}"
    );

    // A run that ends in the moment answers in the call; one that requires a task is one.
    let quick_sync = s.tool("slow", json!({ "seconds": 0 }));
    assert_eq!(quick_sync["resultType"], "complete", "{quick_sync}");
    let required = s.tool("quick", json!({}));
    assert_eq!(required["resultType"], "task", "{required}");
    let rid = required["taskId"].as_str().expect("a task");
    let finished = s.get(rid);
    assert_eq!(finished["status"], "completed", "{finished}");
    assert_eq!(
        finished["result"]["structuredContent"],
        json!({ "answer": "done" })
    );
    // Forbidden: no task, whatever the client says.
    let sync = s.tool("sync", json!({}));
    assert_eq!(sync["resultType"], "complete", "{sync}");
    assert_eq!(
        sync["structuredContent"],
        json!({ "slept": "slept" }),
        "{sync}"
    );

    for unknown in ["01NOSUCHTHREAD0000000000000", &id[..8]] {
        let (_, got) = s.call(
            "tasks/get",
            Some(unknown),
            json!({ "taskId": unknown }),
            tasks_caps(),
        );
        assert_eq!(got["error"]["code"], -32602, "{unknown}: {got}");
    }

    // Without the extension: a required pipeline is refused; tasks/* are too.
    let (status, refused) = s.call(
        "tools/call",
        Some("quick"),
        json!({ "name": "quick", "arguments": {} }),
        json!({}),
    );
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    let (_, not_declared) = s.call("tasks/get", Some(&id), json!({ "taskId": id }), json!({}));
    assert_eq!(not_declared["error"]["code"], -32021, "{not_declared}");
}

/// A pipeline that calls the served `slow` with pipec's own client, which declares the
/// extension and follows the task.
const CALLER: &str = r##"//! Asks the served pipeline to sleep.

server naps {
  url = env("NAPS_URL")
  headers = { Authorization: secret("NAPS_AUTH") }
}

tool slow(seconds: int) -> { slept: string } from naps {
  read_only = true
}

node ask() -> { slept: string } {
  call = slow(seconds: 1)
}

output answer = ask
"##;

#[test]
fn pipecs_own_client_follows_a_served_task_to_its_end() {
    let p = project();
    p.write("caller.pipe", CALLER);
    let (_server, url) = serve_http(&p.dir, &["slow.pipe"], TOKEN);
    let auth = format!("Bearer {TOKEN}");
    let out = p.run_env(
        &["run", "caller.pipe"],
        &[("NAPS_URL", &url), ("NAPS_AUTH", &auth)],
    );
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        common::json(&stdout(&out))["answer"],
        json!({ "slept": "slept 1" })
    );
    // The served run went through as a task: its thread exists and completed.
    let runs = p.run(&["runs", "--json", "--pipeline", "slow"]);
    let runs = common::json(&stdout(&runs));
    assert_eq!(runs[0]["status"], "completed", "{runs}");
}

/// A gate asked while another branch still runs: the task is `input_required` although
/// its run is running, and the answer given meanwhile is taken up by the run (or, once it
/// paused without seeing it, by a resume), which completes.
#[test]
fn a_gate_asked_while_the_run_works_on_is_answered_and_the_run_completes() {
    let p = project();
    let (_server, url) = serve_http(&p.dir, &["busy.pipe"], TOKEN);
    let s = Server { url };
    // The run works on past the moment: its call is a task.
    let (_, created) = s.call(
        "tools/call",
        Some("busy"),
        json!({ "name": "busy", "arguments": {} }),
        json!({ "extensions": { "io.modelcontextprotocol/tasks": {} } }),
    );
    let id = created["result"]["taskId"]
        .as_str()
        .expect("a task")
        .to_string();
    let asking = s.until(&id, |t| keys(t) == ["ok"]);
    assert_eq!(asking["status"], "input_required", "{asking}");
    assert_eq!(p.show_json(&id)["status"], "running", "the run works on");
    s.call(
        "tasks/update",
        Some(&id),
        json!({ "taskId": id, "inputResponses": {
            "ok": { "action": "accept", "content": { "confirm": true } } } }),
        tasks_caps(),
    );
    let done = s.until(&id, |t| t["status"] == "completed");
    assert_eq!(
        done["result"]["structuredContent"],
        json!({ "work": "worked", "ok": { "confirm": true } }),
        "{done}"
    );
}
