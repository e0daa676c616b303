//! A server's questions during a tool call as durable gates, against real servers: the
//! official Python SDK (`tests/interop/asking_server.py`, 2026-07-28's `input_required`
//! with a `requestState` sealed by a key of its process) and the TypeScript reference
//! server `server-everything` (2025-11-25's mid-call `elicitation/create`) over stdio. A run pauses at the question, another
//! process answers, a third resumes; the server's effect happens once, with the answer.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::npm::{EVERYTHING, reference_server};
use crate::common::python::python_with_mcp;
use crate::common::{Project, code, json, stderr, stdout, thread_of};

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/asking_server.py")
}

/// A pipeline calling `pay` (or `tool`) on the asking server with `elicitation`.
fn pipeline(dir: &Path, elicitation: &str, server_args: &[&str], tool: &str) -> String {
    let mut args = vec![
        script().display().to_string(),
        "--log".to_string(),
        dir.join("payments.log").display().to_string(),
    ];
    args.extend(server_args.iter().map(|a| a.to_string()));
    format!(
        r#"server payments {{
  command = {python:?}
  args = {args:?}
  elicitation = {elicitation}
}}

tool {tool}(amount: int, to: string) -> string from payments

act payment() -> string {{
  call = {tool}(amount: 30, to: "Ada")
}}

output said: string = payment
"#,
        python = python_with_mcp(),
    )
}

/// What the server logged: questions asked and payments made.
fn logged(p: &Project) -> Vec<Value> {
    std::fs::read_to_string(p.dir.join("payments.log"))
        .unwrap_or_default()
        .lines()
        .map(json)
        .collect()
}

fn payments(p: &Project) -> Vec<Value> {
    logged(p)
        .into_iter()
        .filter(|e| e.get("paid").is_some())
        .collect()
}

fn ok(o: &Output) -> Value {
    assert_eq!(code(o), 0, "{}{}", stdout(o), stderr(o));
    json(&stdout(o))
}

/// Runs `file`, which must pause; returns the thread.
fn paused(p: &Project, file: &str) -> String {
    let run = p.run(&["run", file]);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    let all = format!("{}{}", stdout(&run), stderr(&run));
    assert!(all.contains("paused"), "{all}");
    thread_of(&all).expect("a thread")
}

/// The thread's pending gates, as `pipec show --json` has them.
fn pending(p: &Project, thread: &str) -> Vec<Value> {
    p.show_json(thread)["gates"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|g| g["state"] == "pending")
        .collect()
}

#[test]
fn a_question_mid_call_waits_at_a_gate_and_an_answer_from_another_process_completes_the_call() {
    let p = Project::new("elicit-2026");
    p.write("pay.pipe", &pipeline(&p.dir, "\"ask\"", &[], "pay"));
    let thread = paused(&p, "pay.pipe");

    let gates = pending(&p, &thread);
    assert_eq!(gates.len(), 1, "{gates:?}");
    let gate = &gates[0];
    assert_eq!(gate["gate"], "payment:g0:i0:ask1");
    let message = gate["message"].as_str().unwrap_or("");
    assert!(
        message.contains("The server `payments` asks") && message.contains("Pay 30 to Ada?"),
        "{message}"
    );
    // The gate's form is the server's, and null declines.
    assert_eq!(
        gate["schema"]["anyOf"][0]["required"],
        serde_json::json!(["confirm"])
    );
    assert_eq!(gate["schema"]["anyOf"][1]["type"], "null");
    assert!(payments(&p).is_empty(), "nothing is paid before the answer");

    // Resumed before anyone answered, the thread waits again: nothing was sent, and
    // the call's row is no unfinished effect.
    let again = p.run(&["resume", &thread]);
    assert_eq!(code(&again), 0, "{}", stderr(&again));
    assert!(
        stderr(&again).contains("waits for an answer"),
        "{}",
        stderr(&again)
    );
    assert_eq!(pending(&p, &thread).len(), 1);

    // An answer that does not fit the form is refused, and nothing changes.
    let wrong = p.run(&[
        "answer",
        &thread,
        r#"payment:g0:i0:ask1={"confirm": "yes"}"#,
    ]);
    assert_eq!(code(&wrong), 1, "{}", stderr(&wrong));
    assert!(
        stderr(&wrong).contains("the form the server sent"),
        "{}",
        stderr(&wrong)
    );
    assert_eq!(pending(&p, &thread).len(), 1);

    // Another process answers, a third resumes; the server ran in the first one, so the
    // round's sealed state is not its own any more: the call is asked afresh and the
    // same question answered with the stored answer.
    let answered = p.run(&[
        "answer",
        &thread,
        r#"payment:g0:i0:ask1={"confirm": true, "note": "rent"}"#,
    ]);
    assert_eq!(code(&answered), 0, "{}", stderr(&answered));
    let resumed = ok(&p.run(&["resume", &thread]));
    assert_eq!(resumed["said"], "paid 30 to Ada");
    let paid = payments(&p);
    assert_eq!(paid.len(), 1, "paid once: {paid:?}");
    assert_eq!(paid[0]["note"], "rent", "with the person's answer");

    // The call's journal row says it was asked, then made.
    let internal = json(&stdout(&p.run(&["show", &thread, "--json", "--internal"])));
    let states: Vec<&str> = internal["calls"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["record"]["state"].as_str())
        .collect();
    assert_eq!(states, ["asked", "asked", "ok"], "{internal}");
}

#[test]
fn a_declined_question_is_told_to_the_server() {
    let p = Project::new("elicit-decline");
    p.write("pay.pipe", &pipeline(&p.dir, "\"ask\"", &[], "pay"));
    let thread = paused(&p, "pay.pipe");
    let resumed = ok(&p.run(&["resume", &thread, "--answer", "payment:g0:i0:ask1=null"]));
    assert_eq!(resumed["said"], "not paid: decline");
    assert!(payments(&p).is_empty());
}

#[test]
fn questions_in_two_rounds_are_two_gates_answered_in_turn() {
    let p = Project::new("elicit-rounds");
    p.write("pay.pipe", &pipeline(&p.dir, "\"ask\"", &[], "pay_twice"));
    let thread = paused(&p, "pay.pipe");
    assert_eq!(pending(&p, &thread)[0]["gate"], "payment:g0:i0:ask1");
    let again = p.run(&[
        "resume",
        &thread,
        "--answer",
        r#"payment:g0:i0:ask1={"confirm": true}"#,
    ]);
    assert_eq!(code(&again), 0, "{}", stderr(&again));
    let gates = pending(&p, &thread);
    assert_eq!(gates.len(), 1, "{gates:?}");
    assert_eq!(gates[0]["gate"], "payment:g0:i0:ask2");
    assert!(
        gates[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Which reference")),
        "{gates:?}"
    );
    assert!(payments(&p).is_empty());
    let done = ok(&p.run(&[
        "resume",
        &thread,
        "--answer",
        r#"payment:g0:i0:ask2={"reference": "INV-7"}"#,
    ]));
    assert_eq!(done["said"], "paid 30 to Ada");
    let paid = payments(&p);
    assert_eq!(paid.len(), 1, "{paid:?}");
    assert_eq!(paid[0]["reference"], "INV-7");
}

#[test]
fn a_declared_answer_or_the_default_policy_needs_no_person() {
    let p = Project::new("elicit-policy");
    p.write(
        "answer.pipe",
        &pipeline(
            &p.dir,
            r#"{ confirm: true, note: "standing order" }"#,
            &[],
            "pay",
        ),
    );
    let done = ok(&p.run(&["run", "answer.pipe"]));
    assert_eq!(done["said"], "paid 30 to Ada");
    assert_eq!(payments(&p)[0]["note"], "standing order");

    // Declining (the default) does not tell the server it may ask: this one then
    // refuses the call, as its resolver needs a form.
    p.write(
        "decline.pipe",
        &pipeline(&p.dir, r#""decline""#, &[], "pay"),
    );
    let declined = p.run(&["run", "decline.pipe"]);
    assert_eq!(code(&declined), 1, "{}", stderr(&declined));
    assert!(
        stderr(&declined).contains("elicitation capability"),
        "{}",
        stderr(&declined)
    );
    assert_eq!(payments(&p).len(), 1, "declining pays nothing");
}

/// While the thread waits at the question, its process dies by `kill -9` (another branch
/// still ran): the question's gate was committed before, the answer given from another
/// process is kept, and the resume makes the call once.
#[test]
fn kill_9_while_a_question_waits_loses_nothing() {
    let p = Project::new("elicit-kill");
    let mut text = pipeline(&p.dir, "\"ask\"", &[], "pay");
    text.push_str(
        r#"
node slow() -> string {
  exec = ["sh", "-c", "if [ ! -e slept ]; then touch slept; sleep 30; fi; echo '\"slept\"'"]
  idempotent = true
}

output waited: string = slow
"#,
    );
    p.write("pay.pipe", &text);
    let mut run = p
        .cmd(&["run", "pay.pipe"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("pipec run starts");
    // Wait for the question's gate, then kill the process that still runs `slow`.
    let started = Instant::now();
    let thread = loop {
        let runs = p.run(&["runs", "--json"]);
        let id = json(&stdout(&runs))[0]["id"].as_str().map(str::to_string);
        if let Some(id) = id
            && !pending(&p, &id).is_empty()
        {
            break id;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no question came"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    p.kill_holder(&mut run, &thread);

    let answered = p.run(&["answer", &thread, r#"payment:g0:i0:ask1={"confirm": true}"#]);
    assert_eq!(code(&answered), 0, "{}", stderr(&answered));
    let resumed = p.run(&["resume", &thread]);
    let out = ok(&resumed);
    assert_eq!(out["said"], "paid 30 to Ada");
    assert_eq!(payments(&p).len(), 1, "{:?}", logged(&p));
}

#[test]
fn server_everything_over_stdio_asks_through_a_gate() {
    let Some(server) = reference_server(EVERYTHING) else {
        return;
    };
    let p = Project::new("elicit-everything");
    p.write(
        "ask.pipe",
        &format!(
            r#"server everything {{
  command = {server:?}
  args = ["stdio"]
  elicitation = "ask"
}}

tool elicit() -> string from everything {{
  name = "trigger-elicitation-request"
}}

act asked() -> string {{
  call = elicit()
}}

output said: string = asked
"#,
            server = server.display().to_string()
        ),
    );
    let thread = paused(&p, "ask.pipe");
    let gates = pending(&p, &thread);
    assert_eq!(gates[0]["gate"], "asked:g0:i0:ask1");
    assert_eq!(
        gates[0]["schema"]["anyOf"][0]["properties"]["name"]["type"],
        "string"
    );
    let done = ok(&p.run(&[
        "resume",
        &thread,
        "--answer",
        r#"asked:g0:i0:ask1={"name": "Ada Lovelace", "check": true}"#,
    ]));
    let said = done["said"].as_str().unwrap_or("");
    assert!(
        said.contains("\"action\": \"accept\"") && said.contains("Ada Lovelace"),
        "{said}"
    );
}

/// In an agent loop, the question of a tool call the model asked for waits at a gate
/// named after that call; the resume goes on from the journaled turn (the model is not
/// asked again) and makes the call with the answer.
#[test]
fn a_question_during_an_agent_loops_tool_call_waits_at_the_calls_gate() {
    let p = Project::new("elicit-agent");
    let mut text = pipeline(&p.dir, "\"ask\"", &[], "pay").replace(
        r#"act payment() -> string {
  call = pay(amount: 30, to: "Ada")
}

output said: string = payment
"#,
        r#"model fast {
  provider = "scripted"
  replies = "replies.json"
}

type Done {
  note: string
}

act payer() -> Done {
  model = fast
  prompt = "Pay Ada 30, then say what happened."
  tools = [pay]
}

output done: Done = payer
"#,
    );
    text.push('\n');
    p.write("pay.pipe", &text);
    p.write(
        "replies.json",
        &serde_json::json!({ "payer": [
            { "tool_calls": [ { "name": "pay", "arguments": { "amount": 30, "to": "Ada" } } ] },
            { "json": { "note": "paid" } }
        ] })
        .to_string(),
    );
    let thread = paused(&p, "pay.pipe");
    let gates = pending(&p, &thread);
    assert_eq!(gates.len(), 1, "{gates:?}");
    let gate = gates[0]["gate"].as_str().unwrap_or("").to_string();
    assert_eq!(gate, "payer:g0:i0:s0:c1:ask1", "named after the call");
    assert!(payments(&p).is_empty());
    let done = ok(&p.run(&[
        "resume",
        &thread,
        "--answer",
        &format!(r#"{gate}={{"confirm": true, "note": "agent"}}"#),
    ]));
    assert_eq!(done["done"]["note"], "paid");
    let paid = payments(&p);
    assert_eq!(paid.len(), 1, "{paid:?}");
    assert_eq!(paid[0]["note"], "agent");
}

/// `--rerun-from` a node whose call waits at a question: the question of the generation
/// that goes goes with it, and the new generation asks its own.
#[test]
fn a_rerun_drops_the_question_of_the_generation_it_replaces() {
    let p = Project::new("elicit-rerun");
    p.write("pay.pipe", &pipeline(&p.dir, "\"ask\"", &[], "pay"));
    let thread = paused(&p, "pay.pipe");
    let again = p.run(&["resume", &thread, "--rerun-from", "payment"]);
    assert_eq!(code(&again), 0, "{}", stderr(&again));
    let gates: Vec<String> = pending(&p, &thread)
        .iter()
        .filter_map(|g| g["gate"].as_str().map(str::to_string))
        .collect();
    assert_eq!(gates, ["payment:g1:i0:ask1"]);
    let done = ok(&p.run(&[
        "resume",
        &thread,
        "--answer",
        r#"payment:g1:i0:ask1={"confirm": true}"#,
    ]));
    assert_eq!(done["said"], "paid 30 to Ada");
    assert_eq!(payments(&p).len(), 1);
}

/// What a server puts in its form (here a secret it was given, in a field's description)
/// is scrubbed before the store keeps the question.
#[test]
fn a_secret_a_server_echoes_into_its_form_is_not_stored() {
    let p = Project::new("elicit-secret");
    let token = "pay-token-8c1f0e7d2b9a4453";
    let text = pipeline(&p.dir, "\"ask\"", &[], "pay").replace(
        "  elicitation = \"ask\"\n",
        "  elicitation = \"ask\"\n  env = { PAYMENTS_TOKEN: secret(\"PAYMENTS_TOKEN\") }\n",
    );
    p.write("pay.pipe", &text);
    let run = p
        .cmd(&["run", "pay.pipe"])
        .env("PAYMENTS_TOKEN", token)
        .stdin(Stdio::null())
        .output()
        .expect("pipec runs");
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    let printed = format!("{}{}", stdout(&run), stderr(&run));
    assert!(printed.contains("paused"), "{printed}");
    assert!(!printed.contains(token), "the form's secret was printed");
    assert!(
        !p.store_contents().contains(token),
        "the form's secret was stored"
    );
}

/// A pipeline with a server whose requests for a model's reply (sampling) go to
/// `sampling`, when given; `describe` asks for one.
fn describing(sampling: &str) -> String {
    let python = python_with_mcp();
    format!(
        r#"model fast {{
  provider = "scripted"
  replies = "replies.json"
}}

server payments {{
  command = {python:?}
  args = [{script:?}]
  {sampling}
}}

tool describe(to: string) -> string from payments {{
  read_only = true
}}

node described() -> string {{
  call = describe(to: "Ada")
}}

output said: string = described
"#,
        script = script().display().to_string(),
    )
    .replace("  \n", "")
}

#[test]
fn a_servers_request_for_a_model_reply_goes_to_the_declared_model() {
    let p = Project::new("sampling-2026");
    p.write("describe.pipe", &describing("sampling = fast"));
    p.write(
        "replies.json",
        &serde_json::json!({ "payments:sampling": [ { "text": "pioneer of programmable computing" } ] })
            .to_string(),
    );
    let done = ok(&p.run(&["run", "describe.pipe"]));
    assert_eq!(done["said"], "Ada: pioneer of programmable computing");

    // Without `sampling`, pipec does not answer, and the call fails.
    p.write("plain.pipe", &describing(""));
    let refused = p.run(&["run", "plain.pipe"]);
    assert_eq!(code(&refused), 1, "{}", stderr(&refused));
}

#[test]
fn server_everything_over_stdio_samples_the_declared_model() {
    let Some(server) = reference_server(EVERYTHING) else {
        return;
    };
    let p = Project::new("sampling-everything");
    p.write(
        "sample.pipe",
        &format!(
            r#"model fast {{
  provider = "scripted"
  replies = "replies.json"
}}

server everything {{
  command = {server:?}
  args = ["stdio"]
  sampling = fast
}}

tool sample(prompt: string) -> string from everything {{
  name = "trigger-sampling-request"
}}

act asked() -> string {{
  call = sample(prompt: "Name a colour.")
}}

output said: string = asked
"#,
            server = server.display().to_string()
        ),
    );
    p.write(
        "replies.json",
        &serde_json::json!({ "everything:sampling": [ { "text": "vermilion" } ] }).to_string(),
    );
    let done = ok(&p.run(&["run", "sample.pipe"]));
    let said = done["said"].as_str().unwrap_or("");
    assert!(said.contains("vermilion"), "{said}");
}
