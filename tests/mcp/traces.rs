//! Traces of the README's deal research, received by a real backend no one here wrote:
//! Arize Phoenix from PyPI (`tests/common/phoenix.rs`), fed over OTLP/HTTP by `pipec run`
//! and, after a pause at the gate, by `pipec resume` in another process; read back from
//! Phoenix's API. The research agent's MCP server is the official Python SDK's (the CRM
//! fixture), which logs the `_meta` of each tool call: the `traceparent` it received
//! names the `execute_tool` span of the same trace.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::phoenix::{PROJECT_ATTRIBUTE, Phoenix};
use common::python::{crm_server, python_with_mcp};
use common::*;
use serde_json::Value;

const PROJECT: &str = "pipec-deal-research";

/// The README's pipeline, its CRM the Python SDK's server over stdio, logging `_meta`.
fn project() -> Project {
    let p = Project::new("traces");
    let source = std::fs::read_to_string(crate_root().join("pipelines/deal_research.pipe"))
        .expect("the pipeline");
    let start = source.find("server crm {").expect("a server block");
    let end = start + source[start..].find("\n}\n").expect("its end") + 2;
    let block = format!(
        "server crm {{\n  command = \"{}\"\n  args = [\"{}\"]\n  env = {{\n    CRM_META_LOG: env(\"CRM_META_LOG\", default: \"\"),\n    CRM_EMAILS: \"100\",\n  }}\n}}",
        python_with_mcp(),
        crm_server().display()
    );
    p.write(
        "deal_research.pipe",
        &format!("{}{}{}", &source[..start], block, &source[end..]),
    );
    for f in [
        "prompts/research/scan.jinja",
        "prompts/consume/brief.jinja",
        "pipelines/replies/deal_research.json",
    ] {
        let text = std::fs::read_to_string(crate_root().join(f)).expect("a file");
        let name = f.rsplit('/').next().unwrap_or(f);
        let rel = if f.starts_with("prompts/") { f } else { name };
        p.write(rel, &text);
    }
    p
}

fn pipec(p: &Project, phoenix: &Phoenix, args: &[&str]) -> std::process::Output {
    let mut c = p.cmd(args);
    for (k, v) in phoenix.exporter_env() {
        c.env(k, v);
    }
    c.env(
        "OTEL_RESOURCE_ATTRIBUTES",
        format!("{PROJECT_ATTRIBUTE}={PROJECT}"),
    )
    .env("CRM_META_LOG", p.dir.join("meta.log"))
    .stdin(Stdio::null())
    .output()
    .expect("pipec runs")
}

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

fn int(v: &Value) -> i64 {
    v.as_i64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or(-1)
}

#[test]
fn a_paused_and_resumed_run_is_one_trace_in_phoenix() {
    let phoenix = Phoenix::start();
    let p = project();
    let run = pipec(
        &p,
        &phoenix,
        &[
            "run",
            "deal_research.pipe",
            "--input",
            "deal_id=D1",
            "--model",
            "fast=scripted:deal_research.json",
        ],
    );
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    let thread = thread_of(&stdout(&run)).unwrap_or_else(|| panic!("paused: {}", stderr(&run)));
    let resumed = pipec(
        &p,
        &phoenix,
        &[
            "resume",
            &thread,
            "--answer",
            r#"review={"approved": true}"#,
        ],
    );
    assert_eq!(code(&resumed), 0, "{}", stderr(&resumed));
    let shown = p.show_json(&thread);

    let spans = phoenix.wait_for_spans(
        PROJECT,
        |s| {
            named(s, "invoke_workflow deal_research").len() == 2
                && !named(s, "gate review").is_empty()
        },
        Duration::from_secs(60),
    );
    // One trace: the thread's id.
    let trace = format!(
        "{:032x}",
        pipec::store::ids::decode(&thread).expect("a ULID")
    );
    for s in &spans {
        assert_eq!(s["trace_id"], trace.as_str(), "{s}");
    }
    // Two attempts, each a root, one paused and one completed.
    let attempts = named(&spans, "invoke_workflow deal_research");
    let attempt = |n: i64| {
        *attempts
            .iter()
            .find(|s| int(attr(s, "pipec.attempt")) == n)
            .unwrap_or_else(|| panic!("attempt {n}: {attempts:?}"))
    };
    let (first, second) = (attempt(1), attempt(2));
    assert!(first["parent_id"].is_null() && second["parent_id"].is_null());
    assert_eq!(attr(first, "pipec.outcome"), "paused");
    assert_eq!(attr(second, "pipec.outcome"), "completed");
    assert_eq!(attr(first, "gen_ai.agent.name"), "deal_research");
    assert_eq!(attr(first, "gen_ai.conversation.id"), thread.as_str());
    let child_of = |parent: &Value, name: &str| -> Vec<Value> {
        spans
            .iter()
            .filter(|s| s["name"] == name && s["parent_id"] == parent["span_id"])
            .cloned()
            .collect()
    };
    // The research agent ran in the first attempt: its model turns and its tool call.
    let agent = child_of(first, "invoke_agent research");
    assert_eq!(agent.len(), 1, "{spans:#?}");
    let agent = &agent[0];
    assert_eq!(attr(agent, "gen_ai.operation.name"), "invoke_agent");
    let chats = child_of(agent, "chat gpt-4o-mini");
    let research = shown["nodes"]
        .as_array()
        .and_then(|n| n.iter().find(|n| n["node"] == "research"))
        .map(|n| n["usage"].clone())
        .expect("research's usage");
    assert_eq!(
        chats.len() as i64,
        int(&research["model_calls"]),
        "{chats:#?}"
    );
    let tokens: i64 = chats
        .iter()
        .map(|c| int(attr(c, "gen_ai.usage.input_tokens")))
        .sum();
    assert_eq!(tokens, int(&research["tokens_in"]));
    for c in &chats {
        assert_eq!(attr(c, "gen_ai.operation.name"), "chat");
        assert_eq!(attr(c, "gen_ai.request.model"), "gpt-4o-mini");
        // The scripted replies stood in for the endpoint, and the span says so.
        assert_eq!(attr(c, "gen_ai.provider.name"), "pipec.scripted");
        assert!(int(attr(c, "gen_ai.usage.output_tokens")) >= 0);
    }
    let tools = child_of(agent, "execute_tool get_deal");
    assert_eq!(tools.len(), 1, "{spans:#?}");
    let tool = &tools[0];
    assert_eq!(attr(tool, "mcp.method.name"), "tools/call");
    assert_eq!(attr(tool, "gen_ai.tool.name"), "get_deal");
    // The server received the tool span's context in `_meta`.
    let meta = std::fs::read_to_string(p.dir.join("meta.log")).expect("the meta log");
    let line: Value = json(meta.lines().next().expect("a call"));
    assert_eq!(
        line["meta"]["traceparent"],
        format!("00-{trace}-{}-01", tool["span_id"].as_str().expect("an id")),
        "{meta}"
    );
    // The span names the request the server got, in the version and on the transport
    // the session spoke.
    assert_eq!(
        attr(tool, "jsonrpc.request.id"),
        &line["request_id"],
        "{meta}"
    );
    assert_eq!(attr(tool, "mcp.protocol.version"), "2026-07-28");
    assert_eq!(attr(tool, "network.transport"), "pipe");
    // The resources the agent read.
    let reads = child_of(agent, "resources/read");
    assert!(
        reads.iter().any(|r| attr(r, "mcp.resource.uri")
            .as_str()
            .is_some_and(|u| u.starts_with("mcp://crm/deals/D1/"))),
        "{reads:#?}"
    );
    // The gate's wait: asked in the first attempt, answered from the command line.
    let gate = child_of(first, "gate review");
    assert_eq!(gate.len(), 1, "{spans:#?}");
    assert_eq!(attr(&gate[0], "pipec.gate.answered_by"), "cli");
    // Content stays out unless asked for.
    for s in &spans {
        for key in ["gen_ai.input.messages", "gen_ai.tool.call.arguments"] {
            assert!(attr(s, key).is_null(), "{key} on {s}");
        }
    }
    // The rest ran in the second attempt.
    let consume = child_of(second, "think consume");
    assert_eq!(consume.len(), 1, "{spans:#?}");
    assert_eq!(child_of(&consume[0], "chat gpt-4o-mini").len(), 1);
    assert_eq!(child_of(second, "node digest").len(), 1);
    // Cost rolled up: the attempts' sum is the thread's.
    let cost: f64 = attempts
        .iter()
        .map(|a| attr(a, "pipec.cost_usd").as_f64().unwrap_or(-1.0))
        .sum();
    let thread_cost = shown["usage"]["cost_usd"].as_f64().expect("a cost");
    assert!((cost - thread_cost).abs() < 1e-9, "{cost} {thread_cost}");
}

/// Prompts, replies, tool arguments and results on spans when
/// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` asks for them: a secret passed
/// to a tool, and echoed back by the server, reaches Phoenix as its placeholder only.
#[test]
fn content_asked_for_reaches_phoenix_with_secrets_as_placeholders() {
    const TOKEN: &str = "tok-7f3a91c2e5";
    let phoenix = Phoenix::start();
    let p = Project::new("trace-content");
    p.write(
        "content.pipe",
        &format!(
            r#"server faults {{
  command = "{}"
  args = ["{}"]
}}

tool echo(word: string, token: string) -> json from faults {{
  read_only = true
}}

model fast {{
  provider = "openai"
  name = "gpt-4o-mini"
  api_key = secret("OPENAI_API_KEY")
}}

input word: string

node echoed(word: string = input.word, token: string = secret("ECHO_TOKEN")) -> json {{
  call = echo(word: word, token: token)
}}

think said(word: string = input.word, echoed: json = echoed) -> string {{
  model = fast
  prompt = "Say {{{{ word }}}} back."
}}

output said = said
"#,
            python_with_mcp(),
            common::python::fault_server().display()
        ),
    );
    p.write(
        "replies.json",
        r#"{ "said": [{ "text": "You said heron." }] }"#,
    );
    let project = "pipec-trace-content";
    let mut c = p.cmd(&[
        "run",
        "content.pipe",
        "--input",
        "word=heron",
        "--model",
        "fast=scripted:replies.json",
    ]);
    for (k, v) in phoenix.exporter_env() {
        c.env(k, v);
    }
    let run = c
        .env(
            "OTEL_RESOURCE_ATTRIBUTES",
            format!("{PROJECT_ATTRIBUTE}={project}"),
        )
        .env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
        .env("ECHO_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .output()
        .expect("pipec runs");
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    let spans = phoenix.wait_for_spans(
        project,
        |s| !named(s, "invoke_workflow content").is_empty(),
        Duration::from_secs(60),
    );
    let everything = serde_json::to_string(&spans).expect("JSON");
    assert!(!everything.contains(TOKEN), "the token reached Phoenix");

    let tool = named(&spans, "execute_tool echo");
    assert_eq!(tool.len(), 1, "{spans:#?}");
    let text = |v: &Value| -> Value {
        serde_json::from_str(v.as_str().unwrap_or_else(|| panic!("a string: {v}")))
            .expect("JSON text")
    };
    let arguments = text(attr(tool[0], "gen_ai.tool.call.arguments"));
    assert_eq!(arguments["word"], "heron", "{arguments}");
    // As the journal keeps them: the secret by its name.
    assert_eq!(
        arguments["token"],
        serde_json::json!({ "$secret": "ECHO_TOKEN" }),
        "{arguments}"
    );
    // The server echoed what it got (the real token, scrubbed on its way to the span).
    let result = text(attr(tool[0], "gen_ai.tool.call.result"));
    assert_eq!(result["arguments"]["word"], "heron", "{result}");
    assert_eq!(
        result["arguments"]["token"], "secret(ECHO_TOKEN)",
        "{result}"
    );

    let chat = named(&spans, "chat gpt-4o-mini");
    assert_eq!(chat.len(), 1, "{spans:#?}");
    let input = text(attr(chat[0], "gen_ai.input.messages"));
    let said = input
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["parts"][0]["content"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(said.contains("Say heron back."), "{input}");
    let output = text(attr(chat[0], "gen_ai.output.messages"));
    assert_eq!(output[0]["role"], "assistant", "{output}");
    assert_eq!(
        output[0]["parts"][0]["content"], "You said heron.",
        "{output}"
    );
    assert_eq!(output[0]["finish_reason"], "stop", "{output}");
}
