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
