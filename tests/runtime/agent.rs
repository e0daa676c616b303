//! `agent` and `act` loops through the real binary, against pipec's demo CRM server: with
//! the scripted provider and with a local OpenAI-compatible server (real HTTP). Tool
//! calls and a reader, `max_steps` exhaustion, a `kill -9` between a model turn and its
//! tool calls (the resume neither asks the model again nor repeats a finished effect),
//! `limits`, and `approve` gates that run exactly the arguments they showed.

use crate::common;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use common::chat_server::{ChatServer, text, tool_calls, tool_results};
use common::{Project, code, json, stderr, stdout, thread_of, wait_for};
use serde_json::{Value, json};

/// The pipeline: an `act` over the demo CRM with `get_deal` (read-only, links),
/// `arm_expiry` declared as an effect that is not idempotent, and the `read_emails`
/// reader. `model` and `settings` fill in the model block and the loop's settings.
fn pipeline(model: &str, settings: &str) -> String {
    format!(
        r#"server crm {{
  command = "pipec-demo-crm"
  env = {{
    CRM_CALL_LOG: env("CRM_CALL_LOG", default: ""),
    CRM_FAULT_FILE: env("CRM_FAULT_FILE", default: ""),
  }}
}}

{model}

type Deal {{
  deal_id: string
  name: string
}}

type Armed {{
  armed: int
}}

type Email {{
  id: string
  subject: string
}}

type EmailPage {{
  deal_id: string
  count: int
  emails: Email[]
}}

type Summary {{
  deal_id: string
  note: string
}}

type ActivityLog {{
  deal_id: string
}}

link "activity-history": ActivityLog = "mcp://crm/deals/{{deal_id}}/activity"
link "email-history": EmailPage = "mcp://crm/deals/{{deal_id}}/emails/{{start}}/{{end}}"

/// Look a deal up.
tool get_deal(deal_id: string) -> Deal from crm {{
  read_only = true
  links = ["activity-history", "email-history"]
}}

/// Make the next email reads fail.
tool arm_expiry(count: int) -> Armed from crm {{
  destructive = false
}}

/// Read a date range of a deal's emails.
reader read_emails(deal_id: string, start: string, end: string) -> EmailPage from crm {{
  uri = "mcp://crm/deals/{{deal_id}}/emails/{{start}}/{{end}}"
  max_bytes = 100kb
}}

input deal_id: string

act research(deal_id: string = input.deal_id) -> Summary {{
  model = fast
  prompt = "Research the deal {{{{ deal_id }}}} with the tools, then answer with JSON."
  tools = [get_deal, arm_expiry, read_emails]
{settings}
}}

output summary: Summary = research
"#
    )
}

const SCRIPTED: &str = r#"model fast {
  provider = "scripted"
  replies = "replies.json"
}"#;

fn openai(url: &str) -> String {
    format!(
        r#"model fast {{
  provider = "openai"
  name = "test-model"
  base_url = "{url}"
  api_key = secret("TEST_KEY")
}}"#
    )
}

struct Setup {
    p: Project,
    log: PathBuf,
    faults: PathBuf,
}

fn setup(tag: &str, model: &str, settings: &str, replies: Option<Value>) -> Setup {
    let p = Project::new(tag);
    p.write("act.pipe", &pipeline(model, settings));
    if let Some(r) = replies {
        p.write("replies.json", &r.to_string());
    }
    let log = p.dir.join("calls.log");
    let faults = p.dir.join("faults");
    Setup { p, log, faults }
}

impl Setup {
    fn cmd(&self, args: &[&str]) -> std::process::Command {
        let mut c = self.p.cmd(args);
        c.env("CRM_CALL_LOG", &self.log)
            .env("CRM_FAULT_FILE", &self.faults)
            .env("TEST_KEY", "sk-test-123456")
            .stdin(Stdio::null());
        c
    }

    fn pipec(&self, args: &[&str]) -> std::process::Output {
        self.cmd(args).output().expect("pipec runs")
    }

    fn run(&self) -> std::process::Output {
        self.pipec(&["run", "act.pipe", "--input", "deal_id=D1"])
    }

    /// Runs the pipeline until the call or read whose log line starts with `prefix`
    /// hangs (an injected fault), then kills pipec with `kill -9`; the thread's id.
    fn run_killed_while_hung(&self, prefix: &str) -> String {
        let mut child = self
            .cmd(&["run", "act.pipe", "--input", "deal_id=D1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !self.calls(prefix).iter().any(|l| l.contains("fault=hang")) {
            assert!(
                std::time::Instant::now() < deadline,
                "`{prefix}` never started"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        child.kill().expect("kill -9");
        let _ = child.wait();
        let runs = self.pipec(&["runs"]);
        thread_of(&stdout(&runs)).expect("thread")
    }

    fn calls(&self, prefix: &str) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with(prefix))
            .map(str::to_string)
            .collect()
    }
}

const FINAL: &str = r#"{"deal_id": "D1", "note": "done"}"#;

#[test]
fn a_scripted_loop_calls_tools_and_a_reader_and_stores_their_links() {
    let s = setup(
        "act-scripted",
        SCRIPTED,
        "",
        Some(json!({ "research": [
            { "tool_calls": [
                { "name": "get_deal", "arguments": { "deal_id": "{{ deal_id }}" } },
                { "name": "read_emails", "arguments": { "deal_id": "D1", "start": "2025-03-01", "end": "2025-03-31" } }
            ] },
            { "json": { "deal_id": "D1", "note": "read" } }
        ] })),
    );
    let o = s.run();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(json(&stdout(&o))["summary"]["note"], "read");
    assert_eq!(s.calls("tool get_deal D1").len(), 1);
    assert_eq!(
        s.calls("read mcp://crm/deals/D1/emails/2025-03-01/2025-03-31")
            .len(),
        1
    );
    let thread = thread_of(&stderr(&o))
        .or_else(|| {
            let runs = s.pipec(&["runs"]);
            thread_of(&stdout(&runs))
        })
        .expect("thread");
    let show = json(&stdout(&s.pipec(&[
        "show",
        &thread,
        "--json",
        "--internal",
    ])));
    let kinds: Vec<&str> = show["manifests"]
        .as_array()
        .expect("manifests")
        .iter()
        .filter_map(|m| m["link"]["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["activity-history", "email-history"]);
}

#[test]
fn a_loop_out_of_steps_is_asked_once_more_without_tools_for_its_answer() {
    let server = ChatServer::start(Arc::new(|req: &Value, _seen: &[Value]| {
        if req.get("tools").is_some() {
            tool_calls(&[("get_deal", json!({ "deal_id": "D1" }))])
        } else {
            text(FINAL)
        }
    }));
    let s = setup("act-steps", &openai(&server.url), "  max_steps = 2", None);
    let o = s.run();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(json(&stdout(&o))["summary"]["note"], "done");
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "two turns with tools, then the last one");
    assert!(
        requests[0]["tools"]
            .as_array()
            .is_some_and(|t| t.len() == 3)
    );
    assert!(requests[2].get("tools").is_none(), "{}", requests[2]);
    let last_user = requests[2]["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .cloned()
        .unwrap_or_default();
    assert!(
        last_user["content"]
            .as_str()
            .unwrap_or("")
            .contains("every step"),
        "{last_user}"
    );
    assert_eq!(s.calls("tool get_deal").len(), 2);
    // The tool results went back to the model as tool messages with their call ids.
    let tool_msgs: Vec<&Value> = requests[1]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(tool_msgs.len(), 1);
    assert_eq!(tool_msgs[0]["tool_call_id"], "call_0");
    assert!(
        tool_msgs[0]["content"]
            .as_str()
            .unwrap_or("")
            .contains("email-history"),
        "the model sees the links with their kinds: {}",
        tool_msgs[0]
    );
}

#[test]
fn a_kill_between_a_turn_and_its_tool_calls_neither_reasks_the_model_nor_repeats_the_effect() {
    // Turn 0 arms the expiry (an effect), then looks the deal up; turn 1 answers.
    let server = ChatServer::start(Arc::new(|req: &Value, _seen: &[Value]| {
        if tool_results(req) == 0 {
            tool_calls(&[
                ("arm_expiry", json!({ "count": 2 })),
                ("get_deal", json!({ "deal_id": "D1" })),
            ])
        } else {
            text(FINAL)
        }
    }));
    let s = setup("act-kill", &openai(&server.url), "", None);
    // The look-up hangs the first time: the effect has finished, the turn has not.
    std::fs::write(&s.faults, "hang tool get_deal 1\n").expect("faults");
    let thread = s.run_killed_while_hung("tool get_deal");
    assert_eq!(server.requests().len(), 1, "one model turn before the kill");
    let o = s.pipec(&["resume", &thread]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(json(&stdout(&o))["summary"]["note"], "done");
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        2,
        "the resume asks only for the turn after the tool calls"
    );
    assert_eq!(tool_results(&requests[1]), 2);
    assert_eq!(
        s.calls("tool arm_expiry").len(),
        1,
        "the finished effect is not repeated"
    );
    assert_eq!(
        s.calls("tool get_deal").len(),
        2,
        "the read-only look-up that was in flight is sent again"
    );
}

/// Each tool call of a turn is committed as it finishes: a `kill -9` while a later call
/// of the same turn hangs leaves the finished read-only look-up recorded, and the resume
/// does not make it again (before, the turn's read-only results were committed together
/// after its last call, so the demo CRM logged `get_deal` twice).
#[test]
fn a_finished_read_only_call_of_a_turn_is_not_made_again_after_a_kill_during_its_sibling() {
    let s = setup(
        "act-sibling",
        SCRIPTED,
        "",
        Some(json!({ "research": [
            { "tool_calls": [
                { "name": "get_deal", "arguments": { "deal_id": "D1" } },
                { "name": "read_emails", "arguments": { "deal_id": "D1", "start": "2025-03-01", "end": "2025-03-31" } }
            ] },
            { "json": { "deal_id": "D1", "note": "read" } }
        ] })),
    );
    // The read, the turn's second call, hangs the first time.
    std::fs::write(&s.faults, "hang read mcp://crm/deals/D1/emails/ 1\n").expect("faults");
    let thread = s.run_killed_while_hung("read mcp://crm/deals/D1/emails/");
    assert_eq!(s.calls("tool get_deal D1").len(), 1, "the look-up finished");
    let o = s.pipec(&["resume", &thread]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(json(&stdout(&o))["summary"]["note"], "read");
    assert_eq!(
        s.calls("tool get_deal D1").len(),
        1,
        "the finished look-up is not made again: {:?}",
        s.calls("")
    );
    assert_eq!(
        s.calls("read mcp://crm/deals/D1/emails/").len(),
        2,
        "the read that was in flight is made again"
    );
}

#[test]
fn an_approve_gate_shows_the_call_and_runs_exactly_the_stored_arguments() {
    let s = setup(
        "act-approve",
        SCRIPTED,
        "  approve = [arm_expiry]",
        Some(json!({ "research": [
            { "tool_calls": [{ "name": "arm_expiry", "arguments": { "count": 7 } }] },
            { "json": { "deal_id": "D1", "note": "armed" } }
        ] })),
    );
    let o = s.run();
    let err = format!("{}{}", stdout(&o), stderr(&o));
    assert_eq!(code(&o), 0, "{err}");
    let gate = "research:g0:i0:s0:c1";
    assert!(
        err.contains(gate),
        "the gate is named after the call:\n{err}"
    );
    assert!(
        err.contains("\"count\": 7"),
        "the gate shows the arguments:\n{err}"
    );
    assert!(
        s.calls("tool arm_expiry").is_empty(),
        "nothing runs before the answer"
    );
    let thread = thread_of(&err).expect("thread");
    let o = s.pipec(&[
        "resume",
        &thread,
        "--answer",
        &format!(r#"{gate}={{"approved": true}}"#),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(json(&stdout(&o))["summary"]["note"], "armed");
    let armed = s.calls("tool arm_expiry");
    assert_eq!(armed.len(), 1, "{armed:?}");
    assert!(armed[0].starts_with("tool arm_expiry 7 key="), "{armed:?}");
}

#[test]
fn a_refused_approval_is_not_called_and_the_model_is_told() {
    let s = setup(
        "act-refuse",
        SCRIPTED,
        "  approve = [arm_expiry]",
        Some(json!({ "research": [
            { "tool_calls": [{ "name": "arm_expiry", "arguments": { "count": 3 } }] },
            { "json": { "deal_id": "D1", "note": "{{ deal_id }} left alone" } }
        ] })),
    );
    let o = s.run();
    let thread = thread_of(&stdout(&o)).expect("thread");
    let o = s.pipec(&[
        "resume",
        &thread,
        "--answer",
        r#"research:g0:i0:s0:c1={"approved": false, "note": "not today"}"#,
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(s.calls("tool arm_expiry").is_empty());
    let show = json(&stdout(&s.pipec(&[
        "show",
        &thread,
        "--json",
        "--internal",
    ])));
    let refused = show["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .find(|c| c["call"] == "research:g0:i0:s0:c1")
        .cloned()
        .unwrap_or_default();
    assert_eq!(refused["record"]["state"], "refused", "{refused}");
    assert!(
        refused["record"]["result"]["for_model"]
            .as_str()
            .unwrap_or("")
            .contains("not today"),
        "{refused}"
    );
}

#[test]
fn limits_cap_the_calls_of_a_tool_and_the_model_is_told() {
    let s = setup(
        "act-limits",
        SCRIPTED,
        "  limits = { arm_expiry: 1 }",
        Some(json!({ "research": [
            { "tool_calls": [
                { "name": "arm_expiry", "arguments": { "count": 1 } },
                { "name": "arm_expiry", "arguments": { "count": 2 } }
            ] },
            { "json": { "deal_id": "D1", "note": "ok" } }
        ] })),
    );
    let o = s.run();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let armed = s.calls("tool arm_expiry");
    assert_eq!(armed.len(), 1, "{armed:?}");
    assert!(armed[0].starts_with("tool arm_expiry 1 "), "{armed:?}");
}

#[test]
fn the_declaration_wins_over_annotations_that_contradict_it_with_a_warning() {
    let s = setup(
        "act-warn",
        SCRIPTED,
        "",
        Some(json!({ "research": [{ "json": { "deal_id": "D1", "note": "n" } }] })),
    );
    let o = s.run();
    let err = stderr(&o);
    assert_eq!(code(&o), 0, "{err}");
    assert!(
        err.contains("arm_expiry") && err.contains("idempotent"),
        "the server says arm_expiry is idempotent; the declaration says not:\n{err}"
    );
    let _ = wait_for;
}

#[test]
fn an_openai_loop_calls_a_reader_with_its_template_schema_and_sees_its_typed_content() {
    let server = ChatServer::start(Arc::new(|req: &Value, _seen: &[Value]| {
        if tool_results(req) == 0 {
            tool_calls(&[(
                "read_emails",
                json!({ "deal_id": "D1", "start": "2025-03-01", "end": "2025-03-02" }),
            )])
        } else {
            text(FINAL)
        }
    }));
    let s = setup("act-reader", &openai(&server.url), "", None);
    let o = s.run();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        s.calls("read mcp://crm/deals/D1/emails/2025-03-01/2025-03-02")
            .len(),
        1,
        "the reader read its URI once"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    // The reader is offered as a function whose parameters are the template's variables.
    let reader = requests[0]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["function"]["name"] == "read_emails")
        .cloned()
        .expect("read_emails offered");
    let params = &reader["function"]["parameters"];
    let mut required: Vec<&str> = params["required"]
        .as_array()
        .expect("required")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    required.sort_unstable();
    assert_eq!(required, ["deal_id", "end", "start"], "{params}");
    assert_eq!(params["properties"]["start"]["type"], "string", "{params}");
    // Its content went back parsed into the reader's type.
    let answer = requests[1]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .map(|c| serde_json::from_str::<Value>(c).unwrap_or(Value::Null))
        .expect("a tool message");
    assert_eq!(answer["deal_id"], "D1", "{answer}");
    assert!(answer["emails"].is_array(), "{answer}");
    assert!(answer["count"].is_u64(), "{answer}");
}

#[test]
fn a_scripted_loop_out_of_steps_gets_its_answer_from_the_next_reply() {
    let look_up = json!({ "tool_calls": [
        { "name": "get_deal", "arguments": { "deal_id": "{{ deal_id }}" } }
    ] });
    let s = setup(
        "act-scripted-steps",
        SCRIPTED,
        "  max_steps = 2",
        Some(json!({ "research": [
            look_up, look_up, look_up,
            { "json": { "deal_id": "D1", "note": "forced" } }
        ] })),
    );
    let o = s.run();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(s.calls("tool get_deal D1").len(), 2, "two steps, no third");
    // The third reply asks for a tool on the turn after the last step: the call is not
    // made, the reply is no answer, and the repair turn takes the fourth reply.
    let out = json(&stdout(&o));
    assert_eq!(out["summary"]["note"], "forced", "{out}");
}

/// Shown failing on the old build: a tool call whose arguments nested 120 levels deep was
/// stored with its model turn, and `show --json` printed the thread as a document nested
/// deeper than JSON readers (serde_json, pipec's own) take.
#[test]
fn a_reply_nested_past_the_limit_is_refused_before_its_turn_is_stored() {
    let deep: Value = serde_json::from_str(&format!("{}{}", "[".repeat(120), "]".repeat(120)))
        .expect("deep JSON");
    let server = ChatServer::start(Arc::new(move |_req: &Value, _seen: &[Value]| {
        tool_calls(&[("get_deal", json!({ "deal_id": deep.clone() }))])
    }));
    let s = setup("act-deep-reply", &openai(&server.url), "", None);
    let o = s.run();
    let err = stderr(&o);
    assert_eq!(code(&o), 1, "{err}");
    let thread = thread_of(&err).expect("thread");
    let show = s.pipec(&["show", &thread, "--json", "--internal"]);
    assert_eq!(code(&show), 0, "{}", stderr(&show));
    assert_eq!(json(&stdout(&show))["status"], "failed");
    assert!(err.contains("nests more than 64 levels"), "{err}");
    assert!(s.calls("tool get_deal").is_empty());
}
