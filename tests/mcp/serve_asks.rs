//! A served pipeline's gates asked in-band, driven by the official MCP Python SDK's client
//! (`tests/fixtures/serve_asks/asks_client.py`). In the 2025-11-25 era a gate a form can
//! hold is an `elicitation/create` on the call's stream: accepted, it answers the gate and
//! the call answers the run's outputs; declined or cancelled, the call answers the paused
//! run's link, which `resume_run` still answers. In the 2026-07-28 era the call answers
//! `input_required` keyed by gate name with a sealed `requestState`, driven here by hand
//! (raw JSON-RPC) and by the SDK's own rounds: a changed state, or one sealed with another
//! key, is -32602 and answers nothing, and a state outlives a restart of the server that
//! keeps its key. A client that cannot answer forms is asked nothing. Every pipec process
//! has its configuration folder (so its state key) inside the test's project.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::python::python_with_mcp;
use common::serve_http::{Running, serve_http_in};
use common::{Project, crate_root, pipec_bin};
use serde_json::{Value, json};

const TOKEN: &str = "asks-t0ken";

/// A person reviews a document: a verdict from a set, an optional note, a score.
const REVIEW: &str = r#"//! Reviews a document: a person gives a verdict, a score and maybe a note.

enum Verdict {
  approve
  reject
}

type Review {
  /// The verdict on the document
  verdict: Verdict
  /// Why, in a few words
  note: string?
  score: int
}

input doc: string

gate review(doc: string = input.doc) -> Review {
  message = "Review {{ doc }}"
  suggest = { score: 5 }
}

node summary(doc: string = input.doc, r: Review = review) -> { doc: string, verdict: Verdict, note: string, score: int, approved: bool } {
  return = { doc: doc, verdict: r.verdict, note: r.note ?? "none", score: r.score, approved: r.verdict == "approve" }
}

output summary = summary
"#;

/// A gate whose answer is one value, a `bool`.
const SHIP: &str = r#"//! Ships an item once a person says yes.

input item: string

gate approve(item: string = input.item) -> bool {
  message = "Ship {{ item }}?"
}

node shipped(item: string = input.item, ok: bool = approve) -> { item: string, shipped: bool } {
  return = { item: item, shipped: ok }
}

output result = shipped
"#;

/// Two gates, one after the other: the second's message quotes the first's answer.
const CARD: &str = r#"//! A card: a person gives a name, then a colour for it.

gate name() -> { name: string } {
  message = "Your name?"
}

gate colour(n: { name: string } = name) -> { colour: "red" | "green" } {
  message = "Colour for {{ n.name }}?"
}

node card(n: { name: string } = name, c: { colour: "red" | "green" } = colour) -> { name: string, colour: "red" | "green" } {
  return = { name: n.name, colour: c.colour }
}

output card = card
"#;

/// A gate of the client's roots (`ask = "roots"`), whose answer is the output.
const ROOTS: &str = r#"//! Lists the folders the calling client works in.

gate workspace() {
  ask = "roots"
}

output workspace = workspace
"#;

/// A served prompt with a required argument, and an enum one.
const BRIEF: &str = r#"//! A brief's prompt.

enum Tone {
  kind
  terse
}

serve {
  /// Brief a reviewer.
  prompt brief(
    /// The topic of the brief
    topic: string,
    tone: Tone,
  ) {
    text = "Write a {{ tone }} brief on {{ topic }}."
  }
}
"#;

/// Two gates at once, one a form can hold and one (`json`) it cannot.
const MIXED: &str = r#"//! A yes or no, which a form can ask, and settings, which it cannot.

gate approve() -> bool {
  message = "Go ahead?"
}

gate settings() -> json {
  message = "Paste the settings"
}

node go(ok: bool = approve) -> bool {
  return = ok
}

output go = go
output settings = settings
"#;

fn project(tag: &str) -> Project {
    let p = Project::new(tag);
    p.write("review.pipe", REVIEW);
    p.write("ship.pipe", SHIP);
    p.write("card.pipe", CARD);
    p.write("mixed.pipe", MIXED);
    p.write("roots.pipe", ROOTS);
    p.write("brief.pipe", BRIEF);
    p
}

/// The configuration folder pipec's processes of `p` use (`XDG_CONFIG_HOME`), as
/// `Project::cmd` sets it.
fn config_of(p: &Project) -> PathBuf {
    p.dir.join(".config")
}

#[derive(Clone, Copy, PartialEq)]
enum Era {
    Legacy,
    Modern,
}

impl Era {
    fn mode(self) -> &'static str {
        match self {
            Era::Legacy => "legacy",
            Era::Modern => "2026-07-28",
        }
    }

    fn protocol(self) -> &'static str {
        match self {
            Era::Legacy => "2025-11-25",
            Era::Modern => "2026-07-28",
        }
    }
}

#[derive(Clone, Copy)]
enum Via<'a> {
    /// `pipec serve FILES` over stdio, started by the client.
    Stdio(&'a [&'a str]),
    /// A `pipec serve --http` already running, at this URL.
    Http(&'a str),
}

/// The client, and a stdio server it starts, in `dir` with the configuration folder
/// `config` and `env` besides; the state key and the store come from nowhere else.
struct Client<'a> {
    dir: &'a Path,
    config: PathBuf,
    env: Vec<(&'a str, &'a str)>,
    era: Era,
    elicit: bool,
    /// The roots the client declares and answers `roots/list` with, if any.
    roots: Option<Value>,
}

impl<'a> Client<'a> {
    /// A client of `p`'s project that declares elicitation when `elicit`.
    fn of(p: &'a Project, era: Era, elicit: bool) -> Client<'a> {
        Client {
            dir: &p.dir,
            config: config_of(p),
            env: Vec::new(),
            era,
            elicit,
            roots: None,
        }
    }

    /// The client, declaring roots and answering `roots/list` with `roots`.
    fn with_roots(mut self, roots: Value) -> Client<'a> {
        self.roots = Some(roots);
        self
    }

    /// Runs `steps` (see the client's docstring) and answers each step's out.
    fn drive(&self, via: Via, steps: &Value) -> Vec<Value> {
        let mut cmd = Command::new(python_with_mcp());
        cmd.arg(crate_root().join("tests/fixtures/serve_asks/asks_client.py"))
            .args(["--mode", self.era.mode()])
            .current_dir(self.dir)
            .env("XDG_CONFIG_HOME", &self.config)
            .env_remove("PIPEC_SERVE_STATE_KEY")
            .env_remove("PIPEC_STORE")
            .envs(self.env.iter().copied());
        if self.elicit {
            cmd.arg("--elicit");
        }
        if let Some(roots) = &self.roots {
            cmd.arg("--roots").arg(roots.to_string());
        }
        match via {
            Via::Http(url) => {
                cmd.args(["--url", url, "--token", TOKEN])
                    .arg(steps.to_string());
            }
            Via::Stdio(files) => {
                cmd.arg("--stdio")
                    .arg(pipec_bin())
                    .arg("serve")
                    .args(files)
                    .arg(steps.to_string());
            }
        }
        let out = cmd.stdin(Stdio::null()).output().expect("the client runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "the client failed: {stderr}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let seen: Value = serde_json::from_str(stdout.lines().last().unwrap_or(""))
            .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\n{stderr}"));
        // A client that only sent raw requests negotiated nothing.
        if !seen["protocol"].is_null() {
            assert_eq!(seen["protocol"], self.era.protocol(), "{seen}");
        }
        seen["steps"].as_array().expect("steps").clone()
    }
}

/// `pipec serve FILES --http 127.0.0.1:0` in `dir` with the configuration folder
/// `config` (a restart under another key needs another folder), and its URL.
fn serve(dir: &Path, files: &[&str], config: &Path) -> (Running, String) {
    serve_http_in(dir, files, TOKEN, config)
}

/// The threads of `pipeline` in `p`'s store, newest first, as `pipec runs --json` lists
/// them.
fn runs_of(p: &Project, pipeline: &str) -> Vec<Value> {
    let out = p.run(&["runs", "--json", "--pipeline", pipeline]);
    assert_eq!(common::code(&out), 0, "{}", common::stderr(&out));
    common::json(&common::stdout(&out))
        .as_array()
        .expect("a list")
        .clone()
}

/// The one thread of `pipeline` in `p`'s store.
fn only_run(p: &Project, pipeline: &str) -> String {
    let runs = runs_of(p, pipeline);
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0]["id"].as_str().expect("an id").to_string()
}

/// The gate `gate` of `thread` as `pipec show --json` shows it.
fn gate_row(p: &Project, thread: &str, gate: &str) -> Value {
    let shown = p.show_json(thread);
    shown["gates"]
        .as_array()
        .and_then(|g| g.iter().find(|g| g["gate"] == gate))
        .unwrap_or_else(|| panic!("no gate {gate}: {shown}"))
        .clone()
}

/// An elicitation result that accepts `content`.
fn accept(content: Value) -> Value {
    json!({ "action": "accept", "content": content })
}

/// The names of a form's fields.
fn fields(schema: &Value) -> Vec<String> {
    schema["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// A form's required fields, sorted.
fn required(schema: &Value) -> Vec<String> {
    let mut names: Vec<String> = schema["required"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The messages of the elicitations a call's callback saw.
fn asked_messages(step: &Value) -> Vec<&str> {
    step["asked"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e["message"].as_str()).collect())
        .unwrap_or_default()
}

/// Checks a call answered the run paused at `gates`, with the run's link; answers the
/// thread.
fn paused_at(step: &Value, gates: &[&str]) -> String {
    assert_eq!(step["isError"], false, "{step}");
    let structured = &step["structured"];
    assert_eq!(structured["status"], "paused", "{step}");
    let thread = structured["thread"].as_str().expect("a thread").to_string();
    let waiting: Vec<&str> = structured["gates"]
        .as_array()
        .expect("gates")
        .iter()
        .filter_map(|g| g["gate"].as_str())
        .collect();
    assert_eq!(waiting, gates, "{step}");
    assert_eq!(
        step["links"],
        json!([format!("pipec://runs/{thread}")]),
        "{step}"
    );
    thread
}

/// Checks an error is the refusal of a requestState (-32602, naming it), not another
/// invalid-params error.
fn refused_state(error: &Value) {
    assert_eq!(error["code"], -32602, "{error}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("requestState")),
        "{error}"
    );
}

/// A record gate asked on the call's stream: one field a set of strings, one optional,
/// one a number; the accepted content is the gate's answer and the call's result is the
/// outputs computed from it, in the same call.
fn record_gate_in_band(p: &Project, via: Via) {
    let steps = Client::of(p, Era::Legacy, true).drive(
        via,
        &json!([
            { "op": "call", "tool": "review", "arguments": { "doc": "D-17" },
              "answers": [accept(json!({ "verdict": "reject", "score": 2 }))] },
            { "op": "call", "tool": "review", "arguments": { "doc": "D-18" },
              "answers": [accept(json!({ "verdict": "approve", "score": 9, "note": "tidy" }))] },
        ]),
    );
    let first = &steps[0];
    assert_eq!(first["requests"], json!(["elicitation/create"]), "{first}");
    let asked = &first["asked"][0];
    assert_eq!(asked["mode"], "form", "{first}");
    assert_eq!(asked["message"], "Review D-17", "{first}");
    let schema = &asked["requestedSchema"];
    assert_eq!(schema["type"], "object", "{schema}");
    assert_eq!(fields(schema), ["note", "score", "verdict"], "{schema}");
    assert_eq!(
        required(schema),
        ["score", "verdict"],
        "the optional note is not required: {schema}"
    );
    assert_eq!(
        schema["properties"]["verdict"],
        json!({ "type": "string", "enum": ["approve", "reject"], "description": "The verdict on the document" }),
        "{schema}"
    );
    assert_eq!(
        schema["properties"]["note"],
        json!({ "type": "string", "description": "Why, in a few words" }),
        "{schema}"
    );
    assert_eq!(
        schema["properties"]["score"],
        json!({ "type": "integer", "default": 5 }),
        "the suggested score fills the field in: {schema}"
    );
    assert_eq!(first["isError"], false, "{first}");
    assert_eq!(first["links"], json!([]), "completed: no run link: {first}");
    assert_eq!(
        first["structured"],
        json!({ "summary": { "doc": "D-17", "verdict": "reject", "note": "none", "score": 2, "approved": false } }),
        "{first}"
    );
    let second = &steps[1];
    assert_eq!(asked_messages(second), ["Review D-18"], "{second}");
    assert_eq!(
        second["structured"],
        json!({ "summary": { "doc": "D-18", "verdict": "approve", "note": "tidy", "score": 9, "approved": true } }),
        "{second}"
    );
    // Both runs completed in the store, the gate answered with what the form held.
    let runs = runs_of(p, "review");
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert!(runs.iter().all(|r| r["status"] == "completed"), "{runs:?}");
    let oldest = runs[1]["id"].as_str().expect("an id");
    let row = gate_row(p, oldest, "review");
    assert_eq!(row["state"], "answered", "{row}");
    assert_eq!(
        row["answer"],
        json!({ "verdict": "reject", "score": 2 }),
        "{row}"
    );
    assert_eq!(row["answered_by"], "mcp", "{row}");
}

#[test]
fn legacy_stdio_asks_a_record_gate_in_band_and_the_call_answers_the_outputs() {
    let p = project("asks-record-stdio");
    record_gate_in_band(&p, Via::Stdio(&["review.pipe"]));
}

#[test]
fn legacy_http_session_asks_a_record_gate_in_band_and_the_call_answers_the_outputs() {
    let p = project("asks-record-http");
    let (_server, url) = serve(&p.dir, &["review.pipe"], &config_of(&p));
    record_gate_in_band(&p, Via::Http(&url));
}

#[test]
fn legacy_a_bool_gate_is_asked_as_a_form_of_one_field_named_after_the_gate() {
    let p = project("asks-bool");
    let steps = Client::of(&p, Era::Legacy, true).drive(
        Via::Stdio(&["ship.pipe"]),
        &json!([{ "op": "call", "tool": "ship", "arguments": { "item": "crate-9" },
                  "answers": [accept(json!({ "approve": false }))] }]),
    );
    let call = &steps[0];
    assert_eq!(asked_messages(call), ["Ship crate-9?"], "{call}");
    assert_eq!(
        call["asked"][0]["requestedSchema"],
        json!({
            "type": "object",
            "properties": { "approve": { "type": "boolean" } },
            "required": ["approve"]
        }),
        "{call}"
    );
    // The field's value is the answer: `false`, not `{approve: false}`.
    assert_eq!(
        call["structured"],
        json!({ "result": { "item": "crate-9", "shipped": false } }),
        "{call}"
    );
    let thread = only_run(&p, "ship");
    assert_eq!(gate_row(&p, &thread, "approve")["answer"], false);
}

#[test]
fn legacy_a_declined_gate_answers_the_paused_run_and_resume_run_completes_it() {
    let p = project("asks-decline");
    let steps = Client::of(&p, Era::Legacy, true).drive(
        Via::Stdio(&["review.pipe"]),
        &json!([
            { "op": "call", "tool": "review", "arguments": { "doc": "D-5" },
              "answers": [{ "action": "decline" }] },
            { "op": "read", "uri": { "$of": 0, "take": "thread", "prefix": "pipec://runs/" } },
            { "op": "call", "tool": "resume_run", "arguments": {
                "thread": { "$of": 0, "take": "thread" }, "gate": "review",
                "answer": { "verdict": "approve", "score": 7 } } },
            // With no answer left the client cancels: the gate waits too.
            { "op": "call", "tool": "review", "arguments": { "doc": "D-6" } },
        ]),
    );
    let declined = &steps[0];
    assert_eq!(asked_messages(declined), ["Review D-5"], "{declined}");
    let thread = paused_at(declined, &["review"]);
    assert_eq!(
        declined["structured"]["gates"][0]["message"], "Review D-5",
        "{declined}"
    );
    let run = &steps[1];
    assert_eq!(run["status"], "paused", "{run}");
    assert_eq!(run["gates"][0]["gate"], "review", "{run}");
    let resumed = &steps[2];
    assert_eq!(
        resumed["requests"],
        json!([]),
        "resume_run asks nothing: {resumed}"
    );
    assert_eq!(
        resumed["structured"],
        json!({ "summary": { "doc": "D-5", "verdict": "approve", "note": "none", "score": 7, "approved": true } }),
        "{resumed}"
    );
    assert_eq!(p.show_json(&thread)["status"], "completed");
    let cancelled = &steps[3];
    assert_eq!(
        cancelled["requests"],
        json!(["elicitation/create"]),
        "{cancelled}"
    );
    let other = paused_at(cancelled, &["review"]);
    assert_eq!(gate_row(&p, &other, "review")["state"], "pending");
}

#[test]
fn legacy_an_answer_that_does_not_fit_the_gate_is_refused_with_the_run_link_and_changes_nothing() {
    let p = project("asks-misfit");
    let steps = Client::of(&p, Era::Legacy, true).drive(
        Via::Stdio(&["review.pipe"]),
        &json!([{ "op": "call", "tool": "review", "arguments": { "doc": "D-9" },
                  "answers": [accept(json!({ "verdict": "maybe", "score": 3 }))] }]),
    );
    let refused = &steps[0];
    assert_eq!(asked_messages(refused), ["Review D-9"], "{refused}");
    assert_eq!(refused["isError"], true, "{refused}");
    let thread = only_run(&p, "review");
    assert_eq!(
        refused["links"],
        json!([format!("pipec://runs/{thread}")]),
        "the refusal links the run that still waits: {refused}"
    );
    let text = refused["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("error[") && text.contains("resume_run"),
        "{refused}"
    );
    let row = gate_row(&p, &thread, "review");
    assert_eq!(row["state"], "pending", "{row}");
    assert_eq!(row["answer"], Value::Null, "{row}");
    // The link's run is answered as any other.
    let steps = Client::of(&p, Era::Legacy, false).drive(
        Via::Stdio(&["review.pipe"]),
        &json!([{ "op": "call", "tool": "resume_run", "arguments": {
            "thread": thread, "gate": "review", "answer": { "verdict": "reject", "score": 3 } } }]),
    );
    assert_eq!(
        steps[0]["structured"]["summary"]["verdict"], "reject",
        "{}",
        steps[0]
    );
    assert_eq!(p.show_json(&thread)["status"], "completed");
}

#[test]
fn a_client_that_cannot_answer_forms_is_asked_nothing_and_gets_the_paused_run() {
    let p = project("asks-unable");
    let steps = Client::of(&p, Era::Legacy, false).drive(
        Via::Stdio(&["ship.pipe"]),
        &json!([{ "op": "call", "tool": "ship", "arguments": { "item": "crate-1" } }]),
    );
    assert_eq!(steps[0]["requests"], json!([]), "{}", steps[0]);
    paused_at(&steps[0], &["approve"]);

    let (_server, url) = serve(&p.dir, &["ship.pipe"], &config_of(&p));
    let steps = Client::of(&p, Era::Modern, false).drive(
        Via::Http(&url),
        &json!([
            { "op": "call", "tool": "ship", "arguments": { "item": "crate-2" } },
            // By hand: no capabilities, and only URL elicitation, which is no form.
            { "op": "wire", "tool": "ship", "arguments": { "item": "crate-3" }, "capabilities": {} },
            { "op": "wire", "tool": "ship", "arguments": { "item": "crate-4" },
              "capabilities": { "elicitation": { "url": {} } } },
        ]),
    );
    assert_eq!(steps[0]["requests"], json!([]), "{}", steps[0]);
    paused_at(&steps[0], &["approve"]);
    for raw in &steps[1..] {
        let result = &raw["result"];
        assert_eq!(result["resultType"], "complete", "{raw}");
        assert_eq!(result["structuredContent"]["status"], "paused", "{raw}");
        assert!(result.get("inputRequests").is_none(), "{raw}");
    }
    let runs = runs_of(&p, "ship");
    assert_eq!(runs.len(), 4, "{runs:?}");
    assert!(runs.iter().all(|r| r["status"] == "paused"), "{runs:?}");
}

#[test]
fn modern_http_rounds_by_hand_answer_a_gate_and_a_changed_state_answers_nothing() {
    let p = project("asks-rounds");
    let (_server, url) = serve(&p.dir, &["ship.pipe", "review.pipe"], &config_of(&p));
    let answer = json!({ "approve": accept(json!({ "approve": true })) });
    let steps = Client::of(&p, Era::Modern, true).drive(
        Via::Http(&url),
        &json!([
            { "op": "wire", "tool": "ship", "arguments": { "item": "crate-9" } },
            { "op": "wire", "tool": "ship", "arguments": { "item": "crate-9" }, "responses": answer,
              "state": { "$of": 0, "take": "state", "append": "AA" } },
            { "op": "wire", "tool": "ship", "arguments": { "item": "crate-9" }, "responses": answer,
              "state": { "$of": 0, "take": "state", "flip": true } },
            // A state is bound to the tool it was made for.
            { "op": "wire", "tool": "review", "arguments": { "doc": "D-1" }, "responses": answer,
              "state": { "$of": 0, "take": "state" } },
        ]),
    );
    let first = &steps[0];
    assert_eq!(first["status"], 200, "{first}");
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    assert!(result.get("content").is_none(), "{first}");
    let requests = result["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(
        requests.keys().collect::<Vec<_>>(),
        ["approve"],
        "keyed by the gate's name: {first}"
    );
    let request = &requests["approve"];
    assert_eq!(request["method"], "elicitation/create", "{first}");
    assert_eq!(request["params"]["mode"], "form", "{first}");
    assert_eq!(request["params"]["message"], "Ship crate-9?", "{first}");
    assert_eq!(
        request["params"]["requestedSchema"]["properties"],
        json!({ "approve": { "type": "boolean" } }),
        "{first}"
    );
    let state = result["requestState"].as_str().expect("a requestState");
    assert!(!state.is_empty());
    for refused in &steps[1..] {
        refused_state(&refused["error"]);
    }
    // Nothing answered the gate: the run waits at it.
    let thread = only_run(&p, "ship");
    let row = gate_row(&p, &thread, "approve");
    assert_eq!(row["state"], "pending", "{row}");
    assert_eq!(row["answer"], Value::Null, "{row}");
    assert!(runs_of(&p, "review").is_empty(), "no review ran");

    // The state as it was made answers the gate, and the run completes in that call.
    let steps = Client::of(&p, Era::Modern, true).drive(
        Via::Http(&url),
        &json!([{ "op": "wire", "tool": "ship", "arguments": { "item": "crate-9" },
                  "responses": { "approve": accept(json!({ "approve": false })) },
                  "state": state }]),
    );
    let done = &steps[0]["result"];
    assert_eq!(done["resultType"], "complete", "{done}");
    assert_eq!(done["isError"], false, "{done}");
    assert_eq!(
        done["structuredContent"],
        json!({ "result": { "item": "crate-9", "shipped": false } }),
        "{done}"
    );
    assert_eq!(only_run(&p, "ship"), thread, "the same run went on");
    assert_eq!(p.show_json(&thread)["status"], "completed");
    assert_eq!(gate_row(&p, &thread, "approve")["answer"], false);
}

#[test]
fn modern_http_two_gates_in_a_row_take_two_rounds_with_two_states() {
    let p = project("asks-two-rounds");
    let (_server, url) = serve(&p.dir, &["card.pipe"], &config_of(&p));
    let steps = Client::of(&p, Era::Modern, true).drive(
        Via::Http(&url),
        &json!([
            { "op": "wire", "tool": "card" },
            { "op": "wire", "tool": "card",
              "responses": { "name": accept(json!({ "name": "Ada" })) },
              "state": { "$of": 0, "take": "state" } },
            { "op": "wire", "tool": "card",
              "responses": { "colour": accept(json!({ "colour": "green" })) },
              "state": { "$of": 1, "take": "state" } },
            // The second state again, with another colour: its gate was answered, and
            // a state sent twice answers nothing twice.
            { "op": "wire", "tool": "card",
              "responses": { "colour": accept(json!({ "colour": "red" })) },
              "state": { "$of": 1, "take": "state" } },
        ]),
    );
    let first = &steps[0]["result"];
    assert_eq!(first["resultType"], "input_required", "{first}");
    assert_eq!(
        first["inputRequests"]["name"]["params"]["message"], "Your name?",
        "{first}"
    );
    assert_eq!(first["inputRequests"].as_object().map(|r| r.len()), Some(1));
    let second = &steps[1]["result"];
    assert_eq!(second["resultType"], "input_required", "{second}");
    let colour = &second["inputRequests"]["colour"]["params"];
    assert_eq!(
        colour["message"], "Colour for Ada?",
        "the first answer reached the run: {second}"
    );
    assert_eq!(
        colour["requestedSchema"]["properties"]["colour"]["enum"],
        json!(["red", "green"]),
        "{second}"
    );
    assert_eq!(
        second["inputRequests"].as_object().map(|r| r.len()),
        Some(1)
    );
    assert_ne!(
        first["requestState"], second["requestState"],
        "each round has its own state"
    );
    let expected = json!({ "card": { "name": "Ada", "colour": "green" } });
    for done in &steps[2..] {
        let result = &done["result"];
        assert_eq!(result["resultType"], "complete", "{done}");
        assert_eq!(result["structuredContent"], expected, "{done}");
    }
    let thread = only_run(&p, "card");
    assert_eq!(
        gate_row(&p, &thread, "colour")["answer"],
        json!({ "colour": "green" })
    );
}

/// The SDK's `call_tool` with an elicitation callback: it answers each gate as the era
/// asks it, and the call's result is the outputs; a decline answers the paused run.
fn sdk_answers_the_gates(p: &Project, via: Via) {
    let steps = Client::of(p, Era::Modern, true).drive(
        via,
        &json!([
            { "op": "call", "tool": "card",
              "answers": [accept(json!({ "name": "Bea" })), accept(json!({ "colour": "red" }))] },
            { "op": "call", "tool": "ship", "arguments": { "item": "crate-5" },
              "answers": [{ "action": "decline" }] },
        ]),
    );
    let card = &steps[0];
    assert_eq!(
        asked_messages(card),
        ["Your name?", "Colour for Bea?"],
        "{card}"
    );
    assert_eq!(
        card["requests"],
        json!(["elicitation/create", "elicitation/create"]),
        "{card}"
    );
    assert_eq!(
        card["structured"],
        json!({ "card": { "name": "Bea", "colour": "red" } }),
        "{card}"
    );
    let declined = &steps[1];
    assert_eq!(asked_messages(declined), ["Ship crate-5?"], "{declined}");
    let thread = paused_at(declined, &["approve"]);
    assert_eq!(gate_row(p, &thread, "approve")["state"], "pending");
}

#[test]
fn modern_http_the_sdks_call_tool_drives_the_rounds_itself() {
    let p = project("asks-sdk-http");
    let (_server, url) = serve(&p.dir, &["card.pipe", "ship.pipe"], &config_of(&p));
    sdk_answers_the_gates(&p, Via::Http(&url));
}

#[test]
fn modern_stdio_the_sdks_call_tool_drives_the_rounds_itself() {
    let p = project("asks-sdk-stdio");
    sdk_answers_the_gates(&p, Via::Stdio(&["card.pipe", "ship.pipe"]));
}

#[test]
fn a_request_state_outlives_a_restart_with_the_same_key_and_another_key_refuses_it() {
    let p = project("asks-restart");
    let config = config_of(&p);
    // A call of `ship` for `item`, answering its gate with `approve` and a state.
    let round = |item: &str, answer: Option<(bool, &str)>| -> Value {
        let mut step = json!({ "op": "round", "tool": "ship", "arguments": { "item": item } });
        if let Some((approve, state)) = answer {
            step["responses"] = json!({ "approve": accept(json!({ "approve": approve })) });
            step["state"] = json!(state);
        }
        step
    };
    let drive = |url: &str, steps: Vec<Value>| -> Vec<Value> {
        Client::of(&p, Era::Modern, true).drive(Via::Http(url), &Value::Array(steps))
    };
    let state_of = |asked: &Value| -> String {
        asked["input_required"]["requestState"]
            .as_str()
            .unwrap_or_else(|| panic!("no requestState: {asked}"))
            .to_string()
    };

    let (server, url) = serve(&p.dir, &["ship.pipe"], &config);
    let first = state_of(&drive(&url, vec![round("crate-1", None)])[0]);
    drop(server);
    let key_file = config.join("pipec/serve-state.key");
    let key = std::fs::read(&key_file).expect("the key file was made");
    assert!(key.len() >= 32, "{} bytes", key.len());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key_file)
            .expect("key file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "readable by its owner alone");
    }

    // Another process on the same configuration folder and store takes the state; it
    // then makes one more.
    let (server, url) = serve(&p.dir, &["ship.pipe"], &config);
    let steps = drive(
        &url,
        vec![
            round("crate-1", Some((true, &first))),
            round("crate-2", None),
        ],
    );
    let done = &steps[0];
    assert_eq!(
        done["structured"],
        json!({ "result": { "item": "crate-1", "shipped": true } }),
        "{done}"
    );
    let second = state_of(&steps[1]);
    drop(server);
    assert_eq!(
        std::fs::read(&key_file).expect("key"),
        key,
        "the key is kept"
    );

    // Under another configuration folder (another key), the same store and project: the
    // state is refused and the gate still waits.
    let other = p.dir.join("other-config");
    let (_server, url) = serve(&p.dir, &["ship.pipe"], &other);
    refused_state(&drive(&url, vec![round("crate-2", Some((true, &second)))])[0]["error"]);
    let other_key = std::fs::read(other.join("pipec/serve-state.key")).expect("its own key");
    assert_ne!(other_key, key);
    let runs = runs_of(&p, "ship");
    let waiting: Vec<&Value> = runs.iter().filter(|r| r["status"] == "paused").collect();
    assert_eq!(waiting.len(), 1, "{runs:?}");
    let thread = waiting[0]["id"].as_str().expect("an id");
    assert_eq!(gate_row(&p, thread, "approve")["state"], "pending");
    assert_eq!(
        runs.iter().filter(|r| r["status"] == "completed").count(),
        1,
        "{runs:?}"
    );
}

#[test]
fn servers_sharing_the_state_key_variable_take_each_others_states() {
    let p = project("asks-shared-key");
    let key = "0123456789abcdef0123456789abcdef-shared-by-replicas";
    let (a, b) = (p.dir.join("config-a"), p.dir.join("config-b"));
    let client = |config: &Path| Client {
        dir: &p.dir,
        config: config.to_path_buf(),
        env: vec![("PIPEC_SERVE_STATE_KEY", key)],
        era: Era::Modern,
        elicit: true,
        roots: None,
    };
    let asked = client(&a).drive(
        Via::Stdio(&["ship.pipe"]),
        &json!([{ "op": "round", "tool": "ship", "arguments": { "item": "crate-7" } }]),
    );
    let state = asked[0]["input_required"]["requestState"].clone();
    assert!(state.is_string(), "{asked:?}");
    let done = client(&b).drive(
        Via::Stdio(&["ship.pipe"]),
        &json!([{ "op": "round", "tool": "ship", "arguments": { "item": "crate-7" },
                  "responses": { "approve": accept(json!({ "approve": true })) },
                  "state": state }]),
    );
    assert_eq!(
        done[0]["structured"],
        json!({ "result": { "item": "crate-7", "shipped": true } }),
        "{done:?}"
    );
    for config in [&a, &b] {
        assert!(
            !config.join("pipec/serve-state.key").exists(),
            "the variable's key needs no file"
        );
    }
    // A key shorter than 32 bytes is refused before anything is served.
    let out = p
        .cmd(&["serve", "ship.pipe"])
        .env("PIPEC_SERVE_STATE_KEY", "too-short")
        .stdin(Stdio::null())
        .output()
        .expect("pipec runs");
    assert_eq!(common::code(&out), 2, "{}", common::stderr(&out));
    let err = common::stderr(&out);
    assert!(
        err.contains("PIPEC_SERVE_STATE_KEY") && err.contains("32"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "nothing on the protocol stream");
}

#[test]
fn answers_given_up_front_pre_answer_their_gates() {
    let p = project("asks-up-front");
    let steps = Client::of(&p, Era::Modern, true).drive(
        Via::Stdio(&["ship.pipe", "card.pipe"]),
        &json!([
            // A key that names no gate is ignored.
            { "op": "round", "tool": "ship", "arguments": { "item": "crate-8" },
              "responses": { "approve": accept(json!({ "approve": true })),
                             "nothing": accept(json!({ "x": "y" })) } },
            // The second gate answered up front: only the first is asked.
            { "op": "round", "tool": "card",
              "responses": { "colour": accept(json!({ "colour": "red" })) } },
            { "op": "round", "tool": "card",
              "responses": { "name": accept(json!({ "name": "Cy" })) },
              "state": { "$of": 1, "take": "state" } },
        ]),
    );
    assert_eq!(
        steps[0]["structured"],
        json!({ "result": { "item": "crate-8", "shipped": true } }),
        "no round: {}",
        steps[0]
    );
    let thread = only_run(&p, "ship");
    assert_eq!(
        gate_row(&p, &thread, "approve")["answered_by"],
        "pre-answer"
    );
    let asked = &steps[1]["input_required"]["inputRequests"];
    assert_eq!(
        asked
            .as_object()
            .map(|r| r.keys().map(String::as_str).collect::<Vec<_>>()),
        Some(vec!["name"]),
        "{}",
        steps[1]
    );
    assert_eq!(
        steps[2]["structured"],
        json!({ "card": { "name": "Cy", "colour": "red" } }),
        "{}",
        steps[2]
    );
}

#[test]
fn only_gates_a_form_can_hold_are_asked() {
    let p = project("asks-mixed");
    let steps = Client::of(&p, Era::Legacy, true).drive(
        Via::Stdio(&["mixed.pipe"]),
        &json!([{ "op": "call", "tool": "mixed",
                  "answers": [accept(json!({ "approve": true }))] }]),
    );
    let call = &steps[0];
    assert_eq!(
        asked_messages(call),
        ["Go ahead?"],
        "the json gate is no form: {call}"
    );
    let thread = paused_at(call, &["settings"]);
    assert_eq!(gate_row(&p, &thread, "approve")["answer"], true);
    assert_eq!(gate_row(&p, &thread, "settings")["state"], "pending");
}

/// A gate of the client's roots, asked of a client that declared roots: `roots/list` on
/// the call's stream (2025-11-25) or an input request (2026-07-28, the SDK's own rounds);
/// the roots it answers, with only the fields a root has in pipec (`uri`, `name`), are
/// the gate's answer and the call answers the outputs. A client without roots is asked
/// nothing, and the run waits for `resume_run`.
#[test]
fn a_gate_of_the_clients_roots_is_answered_by_roots_list_in_both_eras() {
    let p = project("asks-roots");
    let roots = json!([
        { "uri": "file:///srv/project/src", "name": "src" },
        { "uri": "file:///srv/project/docs", "_meta": { "x": 1 } }
    ]);
    let expected = json!({ "workspace": { "roots": [
        { "uri": "file:///srv/project/src", "name": "src" },
        { "uri": "file:///srv/project/docs" }
    ] } });
    let step = json!([{ "op": "call", "tool": "roots", "arguments": {} }]);
    let legacy = Client::of(&p, Era::Legacy, false)
        .with_roots(roots.clone())
        .drive(Via::Stdio(&["roots.pipe"]), &step);
    assert_eq!(
        legacy[0]["requests"],
        json!(["roots/list"]),
        "{}",
        legacy[0]
    );
    assert_eq!(legacy[0]["structured"], expected, "{}", legacy[0]);

    let (_server, url) = serve(&p.dir, &["roots.pipe"], &config_of(&p));
    let modern = Client::of(&p, Era::Modern, false)
        .with_roots(roots)
        .drive(Via::Http(&url), &step);
    assert_eq!(
        modern[0]["requests"],
        json!(["roots/list"]),
        "{}",
        modern[0]
    );
    assert_eq!(modern[0]["structured"], expected, "{}", modern[0]);
    let runs = runs_of(&p, "roots");
    assert_eq!(runs.len(), 2, "{runs:?}");
    for run in &runs {
        let thread = run["id"].as_str().expect("an id");
        let row = gate_row(&p, thread, "workspace");
        assert_eq!(row["answered_by"], "mcp", "{row}");
    }

    // Without roots: nothing asked, the run waits, and resume_run answers it.
    let steps = Client::of(&p, Era::Legacy, true).drive(
        Via::Stdio(&["roots.pipe"]),
        &json!([
            { "op": "call", "tool": "roots", "arguments": {} },
            { "op": "call", "tool": "resume_run", "arguments": {
                "thread": { "$of": 0, "take": "thread" }, "gate": "workspace",
                "answer": { "roots": [{ "uri": "file:///elsewhere" }] } } },
        ]),
    );
    assert_eq!(steps[0]["requests"], json!([]), "{}", steps[0]);
    paused_at(&steps[0], &["workspace"]);
    assert_eq!(
        steps[1]["structured"],
        json!({ "workspace": { "roots": [{ "uri": "file:///elsewhere" }] } }),
        "{}",
        steps[1]
    );
}

/// A prompt got without a required argument asks a client that answers forms for the
/// missing ones, one form of text fields (a choice for an enum): on the request's stream
/// (2025-11-25) or as an `input_required` result the SDK answers and sends again
/// (2026-07-28); the accepted values render the prompt. A declined form, or a client
/// without forms, gets the error that names the missing argument.
#[test]
fn a_prompt_asks_a_client_that_answers_forms_for_its_missing_arguments() {
    let p = project("asks-prompt");
    let steps = json!([
        { "op": "prompt", "name": "brief", "arguments": { "topic": "caching" },
          "answers": [accept(json!({ "tone": "terse" }))] },
        { "op": "prompt", "name": "brief", "arguments": {},
          "answers": [{ "action": "decline" }] },
    ]);
    let check = |steps: &[Value]| {
        let asked = &steps[0];
        assert_eq!(asked["requests"], json!(["elicitation/create"]), "{asked}");
        assert_eq!(
            asked["asked"][0]["message"], "The prompt `brief` needs: tone.",
            "{asked}"
        );
        assert_eq!(
            asked["asked"][0]["requestedSchema"]["properties"]["tone"],
            json!({ "type": "string", "title": "tone", "enum": ["kind", "terse"] }),
            "{asked}"
        );
        assert_eq!(
            asked["messages"],
            json!(["Write a terse brief on caching."]),
            "{asked}"
        );
        let declined = &steps[1];
        assert_eq!(
            declined["asked"][0]["requestedSchema"]["required"],
            json!(["topic", "tone"]),
            "{declined}"
        );
        assert_eq!(declined["error"]["code"], -32602, "{declined}");
    };
    check(&Client::of(&p, Era::Legacy, true).drive(Via::Stdio(&["brief.pipe"]), &steps));
    let (_server, url) = serve(&p.dir, &["brief.pipe"], &config_of(&p));
    check(&Client::of(&p, Era::Modern, true).drive(Via::Http(&url), &steps));

    let unable = Client::of(&p, Era::Legacy, false).drive(
        Via::Stdio(&["brief.pipe"]),
        &json!([{ "op": "prompt", "name": "brief", "arguments": { "topic": "x" } }]),
    );
    assert_eq!(unable[0]["requests"], json!([]), "{}", unable[0]);
    assert_eq!(unable[0]["error"]["code"], -32602, "{}", unable[0]);
    assert!(
        unable[0]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("`tone`")),
        "{}",
        unable[0]
    );
}
