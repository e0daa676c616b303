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

use std::time::Duration;

use opentelemetry::trace::{
    Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue, Value};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
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

impl Telemetry {
    /// Traces as the environment asks: `None` when it does not.
    pub fn from_env(env: Env<'_>) -> Result<Option<Telemetry>, String> {
        let Some(protocol) = wanted(env)? else {
            return Ok(None);
        };
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
        Ok(Some(Telemetry {
            processor: std::sync::Arc::new(processor),
            scope,
        }))
    }

    /// Where the runtime hands its spans.
    pub fn sink(&self) -> SpanSink {
        let processor = self.processor.clone();
        let scope = self.scope.clone();
        std::sync::Arc::new(move |rec: SpanRec| processor.on_end(span_data(rec, &scope)))
    }

    /// Sends what is left, waiting at most `within`, and stops.
    pub fn shutdown(self, within: Duration) {
        let _ = self.processor.force_flush();
        let _ = self.processor.shutdown_with_timeout(within);
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
        .map(|l| Link::with_context(context(rec.trace_id, *l, false)))
        .collect();
    SpanData {
        span_context: context(rec.trace_id, rec.span_id, false),
        parent_span_id: rec.parent.map_or(SpanId::INVALID, SpanId::from),
        parent_span_is_remote: false,
        span_kind: match rec.kind {
            pipec_runtime::trace::SpanKind::Internal => SpanKind::Internal,
            pipec_runtime::trace::SpanKind::Client => SpanKind::Client,
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

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_string())
        }
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
            links: vec![9],
            error: Some("E: failed".into()),
        };
        let scope = InstrumentationScope::builder("pipec").build();
        let d = span_data(rec, &scope);
        assert_eq!(d.span_context.trace_id(), TraceId::from(0xabc_u128));
        assert_eq!(d.span_context.span_id(), SpanId::from(7_u64));
        assert_eq!(d.parent_span_id, SpanId::from(3_u64));
        assert_eq!(d.span_kind, SpanKind::Client);
        assert_eq!(d.links.links[0].span_context.span_id(), SpanId::from(9_u64));
        assert_eq!(d.status, Status::error("E: failed"));
        assert_eq!(
            d.attributes[0],
            KeyValue::new("gen_ai.usage.input_tokens", 12_i64)
        );
    }
}
