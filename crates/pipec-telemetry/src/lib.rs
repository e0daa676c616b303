//! pipec's traces sent to a tracing backend over OTLP: the span records the runtime makes
//! ([`pipec_runtime::trace`]) as OpenTelemetry spans, batched on a thread of their own and
//! exported over HTTP, as protobuf or JSON.
//!
//! Off unless asked for, by the standard variables: `OTEL_TRACES_EXPORTER=otlp`, or an
//! endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) with
//! `OTEL_TRACES_EXPORTER` unset; `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`
//! keeps it off. The protocol is `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` or
//! `OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf`, the default, or `http/json`); the
//! endpoint, headers and timeout are read by the OTLP exporter from their usual
//! variables; the service is `OTEL_SERVICE_NAME` (default `pipec`), with the attributes of
//! `OTEL_RESOURCE_ATTRIBUTES`. When it is off nothing here runs and the runtime makes no
//! spans.
//!
//! Metrics come from the same spans, as OpenTelemetry's GenAI and MCP conventions name
//! them ([`Metrics`]): on by `OTEL_METRICS_EXPORTER=otlp`, or with traces when
//! `OTEL_METRICS_EXPORTER` is unset, and exported every `OTEL_METRIC_EXPORT_INTERVAL`
//! (60 s by default) and at exit.

use std::time::Duration;

use opentelemetry::metrics::{Histogram, MeterProvider};
use opentelemetry::trace::{
    Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue, Value};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::{
    BatchSpanProcessor, SpanData, SpanEvents, SpanLinks, SpanProcessor,
};
use pipec_runtime::trace::{Attr, SpanRec, SpanSink};

/// What reads a variable of the environment (the process's, or a test's).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Traces on their way to a backend.
pub struct Telemetry {
    processor: std::sync::Arc<BatchSpanProcessor>,
    scope: InstrumentationScope,
    metrics: Option<std::sync::Arc<Metrics>>,
    /// Whether spans carry content ([`content_wanted`]).
    content: bool,
}

/// The histograms recorded from spans, and their provider.
pub struct Metrics {
    provider: SdkMeterProvider,
    inference: Histogram<f64>,
    input_tokens: Histogram<u64>,
    output_tokens: Histogram<u64>,
    cached_tokens: Histogram<u64>,
    tool: Histogram<f64>,
    mcp: Histogram<f64>,
    agent: Histogram<f64>,
    workflow: Histogram<f64>,
}

/// Whether the environment asks for metrics beside traces that are on.
pub fn metrics_wanted(env: Env<'_>) -> Result<bool, String> {
    let exporter = env("OTEL_METRICS_EXPORTER")
        .filter(|v| !v.trim().is_empty())
        .map(|v| v.trim().to_ascii_lowercase());
    match exporter.as_deref() {
        None | Some("otlp") => Ok(true),
        Some("none") => Ok(false),
        Some(other) => Err(format!(
            "OTEL_METRICS_EXPORTER is `{other}`: pipec exports metrics with `otlp` (or `none` for none)"
        )),
    }
}

impl Metrics {
    fn new(protocol: Protocol, resource: Resource) -> Result<Metrics, String> {
        let exporter = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_protocol(protocol)
            .build()
            .map_err(|e| format!("cannot export metrics: {e}"))?;
        let provider = SdkMeterProvider::builder()
            .with_periodic_exporter(exporter)
            .with_resource(resource)
            .build();
        let meter = provider.meter("pipec");
        let seconds = |name: &'static str, what: &'static str| {
            meter
                .f64_histogram(name)
                .with_unit("s")
                .with_description(what)
                .build()
        };
        let tokens = |name: &'static str, what: &'static str| {
            meter
                .u64_histogram(name)
                .with_unit("{token}")
                .with_description(what)
                .build()
        };
        Ok(Metrics {
            inference: seconds(
                "gen_ai.client.inference.duration",
                "How long a model took to answer a request",
            ),
            input_tokens: tokens(
                "gen_ai.client.inference.usage.input_tokens",
                "Input tokens of a model request",
            ),
            output_tokens: tokens(
                "gen_ai.client.inference.usage.output_tokens",
                "Output tokens of a model request",
            ),
            cached_tokens: tokens(
                "gen_ai.client.inference.usage.cache_read.input_tokens",
                "Input tokens a model request read from the provider's prompt cache",
            ),
            tool: seconds("gen_ai.execute_tool.duration", "How long a tool call took"),
            mcp: seconds(
                "mcp.client.operation.duration",
                "How long an MCP request took",
            ),
            agent: seconds(
                "gen_ai.invoke_agent.duration",
                "How long an agent node worked in an attempt",
            ),
            workflow: seconds(
                "gen_ai.workflow.duration",
                "How long an attempt of a pipeline ran",
            ),
            provider,
        })
    }

    /// Records what a finished span measured.
    pub fn record(&self, rec: &SpanRec) {
        let seconds = rec
            .end
            .duration_since(rec.start)
            .unwrap_or_default()
            .as_secs_f64();
        let attr = |key: &str| {
            rec.attributes
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.clone())
        };
        let keep = |keys: &[&'static str]| -> Vec<KeyValue> {
            let mut out: Vec<KeyValue> = keys
                .iter()
                .filter_map(|k| attr(k).map(|v| KeyValue::new(*k, value(v))))
                .collect();
            if rec.error.is_some() && attr("error.type").is_none() {
                out.push(KeyValue::new("error.type", "_OTHER"));
            }
            out
        };
        let count = |key: &str| match attr(key) {
            Some(Attr::Int(n)) => u64::try_from(n).ok(),
            _ => None,
        };
        let operation = match attr("gen_ai.operation.name") {
            Some(Attr::Str(op)) => op,
            _ => return,
        };
        match operation.as_str() {
            "chat" => {
                let attrs = keep(&[
                    "gen_ai.operation.name",
                    "gen_ai.provider.name",
                    "gen_ai.request.model",
                    "gen_ai.response.model",
                    "error.type",
                ]);
                self.inference.record(seconds, &attrs);
                for (key, h) in [
                    ("gen_ai.usage.input_tokens", &self.input_tokens),
                    ("gen_ai.usage.output_tokens", &self.output_tokens),
                    ("gen_ai.usage.cache_read.input_tokens", &self.cached_tokens),
                ] {
                    if let Some(n) = count(key) {
                        h.record(n, &attrs);
                    }
                }
            }
            "execute_tool" => {
                let attrs = keep(&[
                    "gen_ai.operation.name",
                    "gen_ai.tool.name",
                    "mcp.method.name",
                    "error.type",
                ]);
                self.tool.record(seconds, &attrs);
                self.mcp.record(seconds, &attrs);
            }
            "invoke_agent" => {
                let attrs = keep(&["gen_ai.operation.name", "gen_ai.agent.name", "error.type"]);
                self.agent.record(seconds, &attrs);
            }
            "invoke_workflow" => {
                let attrs = keep(&[
                    "gen_ai.operation.name",
                    "gen_ai.agent.name",
                    "pipec.outcome",
                    "error.type",
                ]);
                self.workflow.record(seconds, &attrs);
            }
            _ => {}
        }
    }
}

/// Whether the environment asks for traces, and over which protocol; an error names the
/// variable that is wrong and what it may be.
pub fn wanted(env: Env<'_>) -> Result<Option<Protocol>, String> {
    let set = |k: &str| env(k).filter(|v| !v.trim().is_empty());
    if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let exporter = set("OTEL_TRACES_EXPORTER").map(|v| v.trim().to_ascii_lowercase());
    let on = match exporter.as_deref() {
        Some("otlp") => true,
        Some("none") => false,
        Some(other) => {
            return Err(format!(
                "OTEL_TRACES_EXPORTER is `{other}`: pipec exports traces with `otlp` (or `none` for none)"
            ));
        }
        None => {
            set("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
                || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
        }
    };
    if !on {
        return Ok(None);
    }
    let protocol = set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|| set("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .map(|p| p.trim().to_ascii_lowercase());
    match protocol.as_deref() {
        None | Some("http/protobuf") => Ok(Some(Protocol::HttpBinary)),
        Some("http/json") => Ok(Some(Protocol::HttpJson)),
        Some(other) => Err(format!(
            "the OTLP protocol `{other}` is not one pipec sends: set OTEL_EXPORTER_OTLP_PROTOCOL to `http/protobuf` or `http/json` (an OpenTelemetry Collector takes both)"
        )),
    }
}

/// Whether spans carry prompts, replies, tool arguments and results: asked for by
/// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` (`true`, or `span_only` /
/// `span_and_event` as newer instrumentations spell it), off by default. pipec writes no
/// log events, so `event_only` keeps content out of spans as `false` and `no_content` do.
pub fn content_wanted(env: Env<'_>) -> Result<bool, String> {
    let value = env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
        .map(|v| v.trim().to_ascii_lowercase())
        .filter(|v| !v.is_empty());
    match value.as_deref() {
        None | Some("false" | "no_content" | "event_only") => Ok(false),
        Some("true" | "span_only" | "span_and_event") => Ok(true),
        Some(other) => Err(format!(
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT is `{other}`: set it to `true` for prompts, replies and tool results on spans (secrets scrubbed), or `false`"
        )),
    }
}

impl Telemetry {
    /// Traces as the environment asks: `None` when it does not.
    pub fn from_env(env: Env<'_>) -> Result<Option<Telemetry>, String> {
        let Some(protocol) = wanted(env)? else {
            return Ok(None);
        };
        let content = content_wanted(env)?;
        // The exporter's HTTP client uses rustls, with the provider pipec uses everywhere.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(protocol)
            .build()
            .map_err(|e| format!("cannot export traces: {e}"))?;
        let service = env("OTEL_SERVICE_NAME")
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| "pipec".to_string());
        let resource = Resource::builder()
            .with_service_name(service)
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let mut processor = BatchSpanProcessor::builder(exporter).build();
        processor.set_resource(&resource);
        let scope = InstrumentationScope::builder("pipec")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        let metrics = if metrics_wanted(env)? {
            Some(std::sync::Arc::new(Metrics::new(protocol, resource)?))
        } else {
            None
        };
        Ok(Some(Telemetry {
            processor: std::sync::Arc::new(processor),
            scope,
            metrics,
            content,
        }))
    }

    /// Where the runtime hands its spans.
    pub fn sink(&self) -> SpanSink {
        let processor = self.processor.clone();
        let scope = self.scope.clone();
        let metrics = self.metrics.clone();
        SpanSink::new(move |rec: SpanRec| {
            if let Some(m) = &metrics {
                m.record(&rec);
            }
            processor.on_end(span_data(rec, &scope));
        })
        .with_content(self.content)
    }

    /// Sends what is left, waiting at most `within`, and stops.
    pub fn shutdown(self, within: Duration) {
        let _ = self.processor.force_flush();
        let _ = self.processor.shutdown_with_timeout(within);
        if let Some(m) = &self.metrics {
            let _ = m.provider.shutdown_with_timeout(within);
        }
    }
}

fn context(trace: u128, span: u64, remote: bool) -> SpanContext {
    SpanContext::new(
        TraceId::from(trace),
        SpanId::from(span),
        TraceFlags::SAMPLED,
        remote,
        TraceState::default(),
    )
}

/// A span record as OpenTelemetry's.
pub fn span_data(rec: SpanRec, scope: &InstrumentationScope) -> SpanData {
    let mut links = SpanLinks::default();
    links.links = rec
        .links
        .iter()
        .map(|l| {
            // A span of another trace was made by another process.
            let remote = l.trace_id != rec.trace_id;
            Link::with_context(context(l.trace_id, l.span_id, remote))
        })
        .collect();
    SpanData {
        span_context: context(rec.trace_id, rec.span_id, false),
        parent_span_id: rec.parent.map_or(SpanId::INVALID, SpanId::from),
        parent_span_is_remote: rec.parent_remote,
        span_kind: match rec.kind {
            pipec_runtime::trace::SpanKind::Internal => SpanKind::Internal,
            pipec_runtime::trace::SpanKind::Client => SpanKind::Client,
            pipec_runtime::trace::SpanKind::Server => SpanKind::Server,
        },
        name: rec.name.into(),
        start_time: rec.start,
        end_time: rec.end,
        attributes: rec
            .attributes
            .into_iter()
            .map(|(k, v)| KeyValue::new(k, value(v)))
            .collect(),
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links,
        status: match rec.error {
            Some(description) => Status::error(description),
            None => Status::Unset,
        },
        instrumentation_scope: scope.clone(),
    }
}

fn value(a: Attr) -> Value {
    match a {
        Attr::Str(s) => Value::from(s),
        Attr::Int(n) => Value::I64(n),
        Attr::Float(f) => Value::F64(f),
        Attr::Bool(b) => Value::Bool(b),
        Attr::Strs(list) => Value::Array(opentelemetry::Array::String(
            list.into_iter().map(Into::into).collect(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipec_runtime::trace::SpanRef;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_string())
        }
    }

    #[test]
    fn content_is_on_only_when_asked_for_by_its_variable() {
        const KEY: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";
        assert_eq!(content_wanted(&env(&[])), Ok(false));
        for on in ["true", "TRUE", " span_only ", "span_and_event"] {
            let pairs: &'static [(&'static str, &'static str)] = Box::leak(Box::new([(KEY, on)]));
            assert_eq!(content_wanted(&env(pairs)), Ok(true), "{on}");
        }
        for off in ["false", "no_content", "event_only", ""] {
            let pairs: &'static [(&'static str, &'static str)] = Box::leak(Box::new([(KEY, off)]));
            assert_eq!(content_wanted(&env(pairs)), Ok(false), "{off}");
        }
        let wrong = content_wanted(&env(&[(KEY, "yes")]));
        assert!(wrong.is_err_and(|e| e.contains("`yes`")));
    }

    #[test]
    fn the_standard_variables_switch_traces_on_and_pick_the_protocol() {
        assert_eq!(wanted(&env(&[])), Ok(None));
        assert_eq!(
            wanted(&env(&[("OTEL_TRACES_EXPORTER", "otlp")])),
            Ok(Some(Protocol::HttpBinary))
        );
        assert_eq!(
            wanted(&env(&[(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "http://127.0.0.1:4318"
            )])),
            Ok(Some(Protocol::HttpBinary))
        );
        assert_eq!(
            wanted(&env(&[
                ("OTEL_TRACES_EXPORTER", "otlp"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
            ])),
            Ok(Some(Protocol::HttpJson))
        );
        assert_eq!(
            wanted(&env(&[
                ("OTEL_TRACES_EXPORTER", "none"),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x")
            ])),
            Ok(None)
        );
        assert_eq!(
            wanted(&env(&[
                ("OTEL_SDK_DISABLED", "true"),
                ("OTEL_TRACES_EXPORTER", "otlp")
            ])),
            Ok(None)
        );
        let grpc = wanted(&env(&[
            ("OTEL_TRACES_EXPORTER", "otlp"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ]));
        assert!(
            grpc.as_ref().is_err_and(|e| e.contains("http/json")),
            "{grpc:?}"
        );
        let zipkin = wanted(&env(&[("OTEL_TRACES_EXPORTER", "zipkin")]));
        assert!(zipkin.is_err_and(|e| e.contains("OTEL_TRACES_EXPORTER")));
    }

    #[test]
    fn metrics_go_with_traces_unless_asked_not_to() {
        assert_eq!(metrics_wanted(&env(&[])), Ok(true));
        assert_eq!(
            metrics_wanted(&env(&[("OTEL_METRICS_EXPORTER", "none")])),
            Ok(false)
        );
        assert!(metrics_wanted(&env(&[("OTEL_METRICS_EXPORTER", "prometheus")])).is_err());
    }

    #[test]
    fn a_record_becomes_a_span_with_its_ids_parent_links_and_status() {
        let rec = SpanRec {
            trace_id: 0xabc,
            span_id: 7,
            parent: Some(3),
            name: "chat gpt-4o".into(),
            kind: pipec_runtime::trace::SpanKind::Client,
            start: std::time::UNIX_EPOCH,
            end: std::time::UNIX_EPOCH + Duration::from_millis(5),
            attributes: vec![("gen_ai.usage.input_tokens", Attr::Int(12))],
            links: vec![
                SpanRef {
                    trace_id: 0xabc,
                    span_id: 9,
                },
                SpanRef {
                    trace_id: 0xdef,
                    span_id: 11,
                },
            ],
            parent_remote: false,
            error: Some("E: failed".into()),
        };
        let scope = InstrumentationScope::builder("pipec").build();
        let d = span_data(rec.clone(), &scope);
        assert_eq!(d.span_context.trace_id(), TraceId::from(0xabc_u128));
        assert_eq!(d.span_context.span_id(), SpanId::from(7_u64));
        assert_eq!(d.parent_span_id, SpanId::from(3_u64));
        assert_eq!(d.span_kind, SpanKind::Client);
        assert_eq!(d.links.links[0].span_context.span_id(), SpanId::from(9_u64));
        assert!(!d.links.links[0].span_context.is_remote());
        // A link into another trace names that trace, made by another process.
        let other = &d.links.links[1].span_context;
        assert_eq!(other.trace_id(), TraceId::from(0xdef_u128));
        assert_eq!(other.span_id(), SpanId::from(11_u64));
        assert!(other.is_remote());
        assert!(!d.parent_span_is_remote);
        // A served request's span: kind server, its parent the client's.
        let server = span_data(
            SpanRec {
                kind: pipec_runtime::trace::SpanKind::Server,
                parent_remote: true,
                ..rec
            },
            &scope,
        );
        assert_eq!(server.span_kind, SpanKind::Server);
        assert!(server.parent_span_is_remote);
        assert_eq!(d.status, Status::error("E: failed"));
        assert_eq!(
            d.attributes[0],
            KeyValue::new("gen_ai.usage.input_tokens", 12_i64)
        );
    }
}
