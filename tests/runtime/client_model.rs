//! The calling client's model (`provider = "client"`) in a run of `pipec run`: each turn
//! of a `think` node waits at a gate named after it, whose row keeps the request as MCP
//! sampling params; an answer given from another process is the model's reply, validated
//! like any reply (a reply that does not fit asks a repair turn, at a gate of its own).
//! What a served pipeline's client answers through sampling: tests/mcp/serve_asks.rs.

use crate::common;

use common::*;

const PIPE: &str = r#"
/// The calling client's model.
model caller {
  provider = "client"
  name = "claude-sonnet"
  max_tokens = 300
}

input city: string

think capital(city: string = input.city) -> { country: string } {
  model = caller
  prompt = "Which country is {{ city }} the capital of?"
  temperature = 0.1
}

output answer = capital
"#;

fn reply(text: &str) -> String {
    serde_json::json!({
        "role": "assistant",
        "content": { "type": "text", "text": text },
        "model": "claude-sonnet-4-5",
        "stopReason": "endTurn"
    })
    .to_string()
}

#[test]
fn a_think_node_of_the_clients_model_waits_for_its_reply_and_takes_it_from_another_process() {
    let p = Project::new("client-model");
    p.write("capital.pipe", PIPE);
    let out = p.run(&[
        "run",
        "capital.pipe",
        "--input",
        "city=Paris",
        "--detailed-exitcode",
    ]);
    assert_eq!(code(&out), 3, "paused\n{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("gate `capital:g0:i0:model1`"), "{text}");
    assert!(
        text.contains(r#""content":{"text":"...","type":"text"}"#),
        "the example answer:\n{text}"
    );
    let thread = thread_of(&text).expect("thread id");

    // The gate's row keeps the request as sampling params: the prompt rendered, the
    // bounds the node and the model declare, the model's name as a hint.
    let shown = p.show_json(&thread);
    let gates = shown["gates"].as_array().expect("gates");
    assert_eq!(gates.len(), 1, "{shown}");
    assert_eq!(gates[0]["state"], "pending", "{shown}");
    let request = &gates[0]["request"];
    assert_eq!(
        request["messages"],
        serde_json::json!([{ "role": "user", "content": { "type": "text", "text": "Which country is Paris the capital of?" } }]),
        "{shown}"
    );
    assert_eq!(request["maxTokens"], 300, "{shown}");
    assert_eq!(request["temperature"], 0.1, "{shown}");
    assert_eq!(
        request["modelPreferences"],
        serde_json::json!({ "hints": [{ "name": "claude-sonnet" }] }),
        "{shown}"
    );
    // `pipec show` prints the prompt under the gate a person answers.
    let out = p.run(&["show", &thread]);
    let text = stdout(&out);
    assert!(
        text.contains("    user:\n      Which country is Paris the capital of?\n"),
        "{text}"
    );

    // A reply that does not fit the output type asks a repair turn: a second gate.
    let out = p.run(&[
        "resume",
        &thread,
        "--answer",
        &format!("capital:g0:i0:model1={}", reply("It is France.")),
        "--detailed-exitcode",
    ]);
    assert_eq!(
        code(&out),
        3,
        "paused again\n{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("gate `capital:g0:i0:model2`"),
        "{}",
        stdout(&out)
    );

    // An answer that is not a sampling result is refused, and changes nothing.
    let out = p.run(&[
        "resume",
        &thread,
        "--answer",
        r#"capital:g0:i0:model2="France""#,
    ]);
    assert_ne!(code(&out), 0);
    assert!(stderr(&out).contains("does not fit"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("answer with the model's reply"),
        "{}",
        stderr(&out)
    );

    let out = p.run(&[
        "resume",
        &thread,
        "--answer",
        &format!("capital:g0:i0:model2={}", reply(r#"{"country": "France"}"#)),
    ]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        json(&stdout(&out))["answer"],
        serde_json::json!({ "country": "France" })
    );
    let shown = p.show_json(&thread);
    assert_eq!(shown["status"], "completed", "{shown}");
}

#[test]
fn a_scripted_model_stands_in_for_the_clients_with_model() {
    let p = Project::new("client-model-override");
    p.write("capital.pipe", PIPE);
    p.write(
        "replies.json",
        r#"{"capital": [{"json": {"country": "France"}}]}"#,
    );
    let out = p.run(&[
        "run",
        "capital.pipe",
        "--input",
        "city=Paris",
        "--model",
        "caller=scripted:replies.json",
    ]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        json(&stdout(&out))["answer"],
        serde_json::json!({ "country": "France" })
    );
}
