//! `pipec replay` through the real binary: a thread run against a real model endpoint
//! and a command with an effect is replayed with the endpoint gone and the command not
//! run again; the same pipeline gives the same values, an edited `return` shows its
//! diff, `--from` keeps what comes before, and a new node that calls a model fails with
//! R0415 instead of calling it.

use std::sync::Arc;

use crate::common;

use common::chat_server::{ChatServer, text};
use common::{Project, code, json, stderr, stdout};

const PIPELINE: &str = r#"model fast {
  provider = "openai"
  name = "gpt-4o-mini"
  base_url = env("CHAT_URL")
  api_key = secret("OPENAI_API_KEY")
}

type Approval {
  approved: bool
}

input name: string

think greet(name: string = input.name) -> string {
  model = fast
  prompt = "Greet {{ name }}."
}

gate review(text: string = greet) -> Approval {
  message = "Send {{ text }}?"
}

node send(text: string = greet, ack: Approval = review) -> { sent: bool } {
  exec = ["./send.sh"]
}

node card(text: string = greet, sent: { sent: bool } = send) -> { text: string, sent: bool } {
  return = { text: text, sent: sent.sent }
}

output card = card
"#;

/// The run to replay, made against a real endpoint; returns its thread.
fn recorded_run(p: &Project) -> String {
    recorded_run_of(p, PIPELINE)
}

/// [`recorded_run`] of another pipeline of the same shape.
fn recorded_run_of(p: &Project, pipeline: &str) -> String {
    p.write("hello.pipe", pipeline);
    p.write(
        "send.sh",
        "#!/bin/sh\ncat >/dev/null\necho sent >> sends.log\necho '{\"sent\": true}'\n",
    );
    let script = p.dir.join("send.sh");
    let mut perms = std::fs::metadata(&script).expect("send.sh").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&script, perms).expect("chmod");
    let chat = ChatServer::start(Arc::new(|_, _| text("Hello Ada")));
    let out = p.run_env(
        &[
            "run",
            "hello.pipe",
            "--input",
            "name=Ada",
            "--answer",
            "review={\"approved\": true}",
        ],
        &[
            ("CHAT_URL", chat.url.as_str()),
            ("OPENAI_API_KEY", "sk-test-1234"),
        ],
    );
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(chat.requests().len(), 1);
    let runs = p.run(&["runs", "--json"]);
    json(&stdout(&runs))[0]["id"]
        .as_str()
        .expect("thread")
        .to_string()
}

fn sends(p: &Project) -> usize {
    std::fs::read_to_string(p.dir.join("sends.log"))
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
fn an_unchanged_pipeline_replays_to_the_same_values_calling_nothing() {
    let p = Project::new("replay-same");
    let thread = recorded_run(&p);
    // No endpoint, no key: the model's reply and the command's result are the record's.
    let out = p.run(&["replay", &thread, "--json"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let report = json(&stdout(&out));
    assert_eq!(report["differ"], 0, "{report:#}");
    assert_eq!(report["status"], "completed", "{report:#}");
    assert_eq!(sends(&p), 1, "the command did not run again");
    let replay = report["replay"].as_str().expect("replay thread");
    assert_ne!(replay, thread);
    // The replay lives in a store of its own: the user's has the recorded thread alone,
    // so no resume or worker of it ever runs the replay for real.
    let runs = p.run(&["runs", "--json"]);
    assert_eq!(json(&stdout(&runs)).as_array().map(Vec::len), Some(1));
    let store = report["store"].as_str().expect("the replay's store");
    let show = p.run(&["show", replay, "--store", store, "--json", "--internal"]);
    let shown = json(&stdout(&show));
    assert_eq!(
        shown["outputs"]["card"],
        serde_json::json!({ "text": "Hello Ada", "sent": true })
    );
    // It made no call, so it journals none: no effect is left in flight.
    assert_eq!(shown["calls"], serde_json::json!([]), "{shown:#}");
}

#[test]
fn an_edited_return_shows_its_diff_and_from_keeps_what_comes_before() {
    let p = Project::new("replay-edit");
    let thread = recorded_run(&p);
    p.write(
        "hello.pipe",
        &PIPELINE.replace(
            "return = { text: text, sent: sent.sent }",
            "return = { text: \"Hi\", sent: sent.sent }",
        ),
    );
    let out = p.run(&["replay", &thread]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("  card    differs (- recorded, + replayed)"),
        "{text}"
    );
    assert!(text.contains("-  \"text\": \"Hello Ada\""), "{text}");
    assert!(text.contains("+  \"text\": \"Hi\""), "{text}");
    assert!(text.contains("  greet   same (recorded)"), "{text}");
    assert!(text.contains("1 of 4 nodes differ"), "{text}");
    assert_eq!(sends(&p), 1);
    // From the node after it, the edited node keeps its recorded value.
    let p2 = Project::new("replay-from");
    let thread = recorded_run(&p2);
    p2.write(
        "hello.pipe",
        &PIPELINE
            .replace(
                "return = { text: text, sent: sent.sent }",
                "return = { text: \"Hi\", sent: sent.sent }",
            )
            .replace("output card = card", "node shown(card: { text: string, sent: bool } = card) -> string {\n  return = card.text\n}\n\noutput card = card\noutput shown = shown"),
    );
    let out = p2.run(&["replay", &thread, "--from", "shown", "--json"]);
    let report = json(&stdout(&out));
    let card = report["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["node"] == "card")
        .expect("card");
    assert_eq!(card["change"], "same", "{report:#}");
    let shown = report["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["node"] == "shown")
        .expect("shown");
    assert_eq!(shown["change"], "added", "{report:#}");
    assert_eq!(shown["now"], "done", "{report:#}");
    let unknown = p2.run(&["replay", &thread, "--from", "nowhere"]);
    assert_eq!(code(&unknown), 2);
    assert!(
        stderr(&unknown).contains("`--from nowhere`"),
        "{}",
        stderr(&unknown)
    );
}

#[test]
fn a_new_node_that_calls_a_model_fails_with_r0415_instead_of_calling() {
    let p = Project::new("replay-new-call");
    let thread = recorded_run(&p);
    p.write(
        "hello.pipe",
        &PIPELINE.replace(
            "output card = card",
            "think shout(text: string = greet) -> string {\n  model = fast\n  prompt = \"Shout {{ text }}.\"\n}\n\noutput card = card\noutput shout = shout",
        ),
    );
    let out = p.run(&["replay", &thread]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("R0415"), "{text}");
    assert!(text.contains("shout"), "{text}");
    assert!(text.contains("a replay calls nothing"), "{text}");
}

#[test]
fn a_call_that_reads_an_edited_node_is_flagged_though_its_result_was_recorded() {
    let p = Project::new("replay-inputs");
    let shaped = PIPELINE
        .replace(
            "node send(text: string = greet,",
            "node shaped(text: string = greet) -> string {\n  return = text\n}\n\nnode send(text: string = shaped,",
        );
    let thread = recorded_run_of(&p, &shaped);
    p.write(
        "hello.pipe",
        &shaped.replace("  return = text\n", "  return = \"Hi\"\n"),
    );
    let out = p.run(&["replay", &thread, "--json"]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    let report = json(&stdout(&out));
    let change = |name: &str| {
        report["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .find(|n| n["node"] == name)
            .map(|n| n["change"].clone())
            .expect("node")
    };
    assert_eq!(change("shaped"), "differs", "{report:#}");
    // `send` ran on what `shaped` gave before: its recorded result may not hold.
    assert_eq!(change("send"), "inputs", "{report:#}");
    assert_eq!(change("greet"), "same", "{report:#}");
    assert_eq!(sends(&p), 1);
}
