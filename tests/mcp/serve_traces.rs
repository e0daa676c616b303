//! A traced client's call of a pipeline `pipec serve` serves joins the client's trace:
//! the official Python SDK's client, itself traced by OpenTelemetry's Python SDK, sends
//! its span's `traceparent` in `_meta`; `pipec serve` makes its `tools/call {tool}`
//! server span a child of it, and the run stays one trace of its own (its thread's),
//! linked both ways. Read back from Arize Phoenix (the tree, in both protocol eras) and,
//! for the links Phoenix does not keep, from the OTLP/JSON the exporter sent.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::otlp_json::{KIND_SERVER, Received};
use common::phoenix::{PROJECT_ATTRIBUTE, Phoenix};
use common::python::python_with_mcp;
use common::serve_http::{call_2026, serve_http_env};
use common::{Project, crate_root, json};
use serde_json::{Value, json};

const TOKEN: &str = "trace-t0ken";
const PROJECT: &str = "pipec-serve-traces";

const SERVED: &str = r#"//! Greets.

input who: string

node greet(w: string = input.who) -> { who: string } {
  return = { who: w }
}

output greeting = greet
"#;

fn served() -> Project {
    let p = Project::new("serve_traces");
    p.write("greet.pipe", SERVED);
    p
}

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

/// The trace id of a thread: its ULID's bits, in hex.
fn trace_of(thread: &str) -> String {
    format!(
        "{:032x}",
        pipec::store::ids::decode(thread).expect("a ULID")
    )
}

#[test]
fn a_traced_clients_call_is_the_parent_of_the_served_call_in_phoenix() {
    let phoenix = Phoenix::start();
    let p = served();
    let mut env = phoenix.exporter_env();
    env.push((
        "OTEL_RESOURCE_ATTRIBUTES".into(),
        format!("{PROJECT_ATTRIBUTE}={PROJECT}"),
    ));
    let (_server, url) = serve_http_env(&p.dir, &["greet.pipe"], TOKEN, &env);
    let client = crate_root().join("tests/interop/traced_client.py");
    for (era, who) in [("legacy", "ada"), ("modern", "grace")] {
        let out = Command::new(python_with_mcp())
            .arg(&client)
            .args(["--url", &url, "--token", TOKEN, "--era", era, "greet"])
            .arg(json!({ "who": who }).to_string())
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("the client runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let said = json(&String::from_utf8_lossy(&out.stdout));
        assert_eq!(said["structured"]["greeting"]["who"], who, "{said}");
        let trace = said["trace_id"].as_str().expect("a trace").to_string();
        let spans = phoenix.wait_for_spans(
            PROJECT,
            |s| {
                s.iter()
                    .any(|x| x["trace_id"] == trace.as_str() && x["name"] == "tools/call greet")
            },
            Duration::from_secs(60),
        );
        let in_trace: Vec<&Value> = spans
            .iter()
            .filter(|s| s["trace_id"] == trace.as_str())
            .collect();
        // The client's own span, the SDK's span of the request under it, and pipec's
        // span of the call under that: one trace across the two processes.
        let root = in_trace
            .iter()
            .find(|s| s["name"] == "review greet")
            .unwrap_or_else(|| panic!("{era}: the client's span: {in_trace:#?}"));
        assert_eq!(root["span_id"], said["span_id"]);
        let sent = in_trace
            .iter()
            .find(|s| s["name"] == "MCP send tools/call greet")
            .unwrap_or_else(|| panic!("{era}: the SDK's request span: {in_trace:#?}"));
        assert_eq!(sent["parent_id"], root["span_id"]);
        let served: Vec<&&Value> = in_trace
            .iter()
            .filter(|s| s["name"] == "tools/call greet")
            .collect();
        assert_eq!(served.len(), 1, "{era}: {in_trace:#?}");
        let call = served[0];
        assert_eq!(call["parent_id"], sent["span_id"], "{era}: {call}");
        let a = &call["attributes"];
        assert_eq!(a["mcp.method.name"], "tools/call");
        assert_eq!(a["gen_ai.tool.name"], "greet");
        assert_eq!(a["gen_ai.operation.name"], "execute_tool");
        assert!(a["error.type"].is_null(), "{call}");
        // The run is the thread's own trace, which the call names.
        let thread = a["gen_ai.conversation.id"]
            .as_str()
            .unwrap_or_else(|| panic!("{era}: the thread: {call}"))
            .to_string();
        let run = phoenix.wait_for_spans(
            PROJECT,
            |s| {
                s.iter().any(|x| {
                    x["trace_id"] == trace_of(&thread).as_str()
                        && x["name"] == "invoke_workflow greet"
                })
            },
            Duration::from_secs(60),
        );
        let workflow = named(&run, "invoke_workflow greet")
            .into_iter()
            .find(|s| s["trace_id"] == trace_of(&thread).as_str())
            .expect("the run's attempt");
        assert_eq!(workflow["attributes"]["pipec.outcome"], "completed");
        assert_eq!(
            workflow["attributes"]["gen_ai.conversation.id"],
            thread.as_str()
        );
    }
}

/// The links between a served call and its run, as the exporter sent them, and a call
/// without a `traceparent` (or with one that is not well formed) traced in its thread's
/// trace alone.
#[test]
fn a_served_call_and_its_run_link_to_each_other() {
    let received = Received::start();
    let p = served();
    let (_server, url) = serve_http_env(&p.dir, &["greet.pipe"], TOKEN, &received.exporter_env());
    let client_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let client_span = "00f067aa0ba902b7";
    let call = |meta: Value, who: &str| {
        let (status, answer) = call_2026(
            &url,
            TOKEN,
            "tools/call",
            Some("greet"),
            json!({ "name": "greet", "arguments": { "who": who }, "_meta": meta }),
            json!({}),
            &[],
        );
        assert_eq!(status, 200, "{answer}");
        assert_eq!(
            answer["result"]["structuredContent"]["greeting"]["who"], who,
            "{answer}"
        );
    };
    call(
        json!({ "traceparent": format!("00-{client_trace}-{client_span}-01") }),
        "ada",
    );
    let spans = received.wait_for(
        |s| {
            !named(s, "tools/call greet").is_empty()
                && !named(s, "invoke_workflow greet").is_empty()
        },
        Duration::from_secs(30),
    );
    let served = named(&spans, "tools/call greet")[0];
    assert_eq!(served["trace_id"], client_trace, "{served}");
    assert_eq!(served["parent_id"], client_span, "{served}");
    assert_eq!(served["kind"], KIND_SERVER, "{served}");
    let thread = served["attributes"]["gen_ai.conversation.id"]
        .as_str()
        .expect("the thread")
        .to_string();
    let workflow = named(&spans, "invoke_workflow greet")[0];
    assert_eq!(workflow["trace_id"], trace_of(&thread).as_str());
    assert!(workflow["parent_id"].is_null(), "{workflow}");
    // Each links to the other.
    assert_eq!(
        served["links"],
        json!([{ "trace_id": workflow["trace_id"], "span_id": workflow["span_id"] }]),
        "{served}"
    );
    assert_eq!(
        workflow["links"],
        json!([{ "trace_id": client_trace, "span_id": served["span_id"] }]),
        "{workflow}"
    );

    // Without a traceparent, or with one that is not one, there is no call span: the run
    // is traced as any other, linked to nothing.
    call(json!({}), "grace");
    call(json!({ "traceparent": "00-not-a-trace-01" }), "linus");
    let spans = received.wait_for(
        |s| named(s, "invoke_workflow greet").len() == 3,
        Duration::from_secs(30),
    );
    assert_eq!(named(&spans, "tools/call greet").len(), 1, "{spans:#?}");
    for w in named(&spans, "invoke_workflow greet") {
        if w["span_id"] != workflow["span_id"] {
            assert_eq!(w["links"], json!([]), "{w}");
        }
    }
}
