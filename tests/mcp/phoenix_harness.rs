//! The Phoenix harness (`tests/common/phoenix.rs`) on its own, without pipec: Arize
//! Phoenix starts, takes a trace that the OpenTelemetry Python SDK exports to it over
//! OTLP/HTTP with protobuf, and gives it back through [`Phoenix::spans`] with the names, the
//! parent and child, the trace id and the attributes that were sent. Phoenix refuses OTLP
//! JSON, which these tests pin down, so the reference trace comes from Python.
//!
//! Needs Phoenix: `PIPEC_TEST_PHOENIX_PYTHON`, or the venv `target/phoenix-venv` made from
//! `tests/interop/phoenix-requirements.txt`.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::phoenix::{
    DEFAULT_PROJECT, PROJECT_ATTRIBUTE, Phoenix, phoenix_python, span_named,
};
use serde_json::Value;

/// How long a sent trace may take to show in Phoenix.
const STORED_WITHIN: Duration = Duration::from_secs(60);

/// Exports one trace with the OpenTelemetry SDK and its OTLP/HTTP protobuf exporter to the
/// URL in `argv[1]`, under the project in `argv[2]` (the resource attribute
/// `openinference.project.name`; none when empty): a root span `pipeline run` and its child
/// `chat m1`, with `gen_ai.*` attributes, an event and an error status. Prints the ids it
/// made as JSON, and fails when Phoenix did not take the export.
const SEND_TRACE: &str = r#"
import json, sys
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.trace import Status, StatusCode, format_span_id, format_trace_id

traces_url, project = sys.argv[1], sys.argv[2]
results = []

class Exporter(OTLPSpanExporter):
    def export(self, spans):
        result = super().export(spans)
        results.append(result)
        return result

resource = {"service.name": "phoenix-harness"}
if project:
    resource["openinference.project.name"] = project
provider = TracerProvider(resource=Resource.create(resource))
provider.add_span_processor(SimpleSpanProcessor(Exporter(endpoint=traces_url)))
tracer = provider.get_tracer("phoenix-harness")
with tracer.start_as_current_span("pipeline run") as parent:
    parent.set_attribute("pipec.pipeline", "triage")
    parent.set_status(Status(StatusCode.OK))
    with tracer.start_as_current_span("chat m1") as child:
        child.set_attribute("gen_ai.operation.name", "chat")
        child.set_attribute("gen_ai.request.model", "m1")
        child.set_attribute("gen_ai.usage.input_tokens", 12)
        child.set_attribute("gen_ai.usage.output_tokens", 5)
        child.set_attribute("pipec.node", "classify")
        child.set_attribute("pipec.score", 0.5)
        child.set_attribute("pipec.cached", False)
        child.set_attribute("pipec.tags", ["a", "b"])
        child.add_event("pipec.retry", {"pipec.attempt": 2})
        child.set_status(Status(StatusCode.ERROR, "the model refused"))
provider.shutdown()
if not results or any(result != SpanExportResult.SUCCESS for result in results):
    sys.exit(f"the export to {traces_url} failed: {results}")
print(json.dumps({
    "trace_id": format_trace_id(parent.get_span_context().trace_id),
    "parent_id": format_span_id(parent.get_span_context().span_id),
    "child_id": format_span_id(child.get_span_context().span_id),
}))
"#;

/// Runs [`SEND_TRACE`] against `phoenix` under `project` (none when empty), and answers
/// the ids it printed.
fn send_trace(phoenix: &Phoenix, project: &str) -> Value {
    let mut command = Command::new(phoenix_python());
    command
        .args(["-c", SEND_TRACE, &phoenix.traces_endpoint(), project])
        .current_dir(phoenix.dir());
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("OTEL_") {
            command.env_remove(&name);
        }
    }
    let out = command
        .stdin(Stdio::null())
        .output()
        .expect("the trace sender runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the trace sender failed:\n{stdout}{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        phoenix.log()
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// Whether `text` is `digits` lowercase hexadecimal digits.
fn is_hex(text: &Value, digits: usize) -> bool {
    text.as_str().is_some_and(|t| {
        t.len() == digits
            && t.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[test]
fn a_trace_sent_over_otlp_http_is_read_back_with_its_parent_and_attributes() {
    let phoenix = Phoenix::start();
    let ids = send_trace(&phoenix, "");
    let spans = phoenix.wait_for_spans(DEFAULT_PROJECT, |spans| spans.len() >= 2, STORED_WITHIN);
    assert_eq!(spans.len(), 2, "{spans:#?}");

    let parent = span_named(&spans, "pipeline run");
    let child = span_named(&spans, "chat m1");
    for span in [parent, child] {
        assert!(is_hex(&span["trace_id"], 32), "{span:#}");
        assert!(is_hex(&span["span_id"], 16), "{span:#}");
        assert_eq!(span["trace_id"], ids["trace_id"], "{span:#}");
    }
    assert_eq!(parent["span_id"], ids["parent_id"]);
    assert_eq!(
        parent["parent_id"],
        Value::Null,
        "a root span has no parent"
    );
    assert_eq!(child["span_id"], ids["child_id"]);
    assert_eq!(child["parent_id"], parent["span_id"]);

    assert_eq!(parent["status_code"], "OK");
    assert_eq!(child["status_code"], "ERROR");
    assert_eq!(child["status_message"], "the model refused");
    let (start, end) = (&child["start_time_unix_nano"], &child["end_time_unix_nano"]);
    assert!(
        start.as_i64().expect("a time") <= end.as_i64().expect("a time"),
        "{child:#}"
    );
    assert!(
        parent["start_time_unix_nano"].as_i64().expect("a time") <= start.as_i64().expect("a time"),
        "the child starts inside its parent: {spans:#?}"
    );
    assert!(
        child["start_time"]
            .as_str()
            .is_some_and(|t| t.contains('T')),
        "{child:#}"
    );

    let attributes = &child["attributes"];
    assert_eq!(
        attributes["gen_ai.operation.name"], "chat",
        "{attributes:#}"
    );
    assert_eq!(attributes["gen_ai.request.model"], "m1", "{attributes:#}");
    assert_eq!(
        attributes["gen_ai.usage.input_tokens"], 12,
        "{attributes:#}"
    );
    assert_eq!(
        attributes["gen_ai.usage.output_tokens"], 5,
        "{attributes:#}"
    );
    assert_eq!(attributes["pipec.node"], "classify", "{attributes:#}");
    assert_eq!(attributes["pipec.score"], 0.5, "{attributes:#}");
    assert_eq!(attributes["pipec.cached"], false, "{attributes:#}");
    assert_eq!(
        attributes["pipec.tags"],
        serde_json::json!(["a", "b"]),
        "{attributes:#}"
    );
    assert!(
        attributes
            .as_object()
            .expect("an object")
            .values()
            .all(|v| !v.is_object()),
        "the attributes are flat: {attributes:#}"
    );
    assert_eq!(parent["attributes"]["pipec.pipeline"], "triage");
    // What Phoenix derives from a chat span's `gen_ai.*` attributes.
    assert_eq!(child["span_kind"], "LLM", "{child:#}");
    assert_eq!(attributes["llm.token_count.prompt"], 12, "{attributes:#}");

    let events = child["events"].as_array().expect("events");
    assert_eq!(events.len(), 1, "{child:#}");
    assert_eq!(events[0]["name"], "pipec.retry");
    assert_eq!(events[0]["attributes"]["pipec.attempt"], 2);
    assert!(events[0]["time_unix_nano"].is_i64(), "{child:#}");
}

#[test]
fn the_resource_attribute_names_the_project_and_otlp_json_is_refused() {
    let phoenix = Phoenix::start();
    assert_eq!(PROJECT_ATTRIBUTE, "openinference.project.name");
    assert!(
        phoenix.spans("harness-project").is_empty(),
        "no such project yet"
    );
    let ids = send_trace(&phoenix, "harness-project");
    let spans = phoenix.wait_for_spans("harness-project", |spans| spans.len() >= 2, STORED_WITHIN);
    assert!(
        spans.iter().all(|span| span["trace_id"] == ids["trace_id"]),
        "{spans:#?}"
    );
    assert!(phoenix.projects().contains(&"harness-project".to_string()));
    assert!(
        phoenix.spans(DEFAULT_PROJECT).is_empty(),
        "nothing went to the default project"
    );

    // OTLP/HTTP with JSON, as an exporter set to `http/json` sends it: Phoenix takes
    // protobuf only.
    let json = serde_json::json!({
        "resourceSpans": [{
            "resource": { "attributes": [] },
            "scopeSpans": [{
                "scope": { "name": "raw" },
                "spans": [{
                    "traceId": "0af7651916cd43dd8448eb211c80319c",
                    "spanId": "b7ad6b7169203331",
                    "name": "json span",
                    "kind": 1,
                    "startTimeUnixNano": "1700000000000000000",
                    "endTimeUnixNano": "1700000001000000000"
                }]
            }]
        }]
    });
    let (status, body) = phoenix.request(
        "POST",
        "/v1/traces",
        "application/json",
        json.to_string().as_bytes(),
    );
    assert_eq!(status, 415, "Phoenix refuses OTLP JSON: {body}");
}
