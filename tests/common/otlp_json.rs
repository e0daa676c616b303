//! A receiver of OTLP/HTTP with JSON bodies (`OTEL_EXPORTER_OTLP_PROTOCOL=http/json`),
//! for what a tracing backend drops: Phoenix keeps no span links, so the tests that
//! check links read the spans exactly as the exporter sent them. It answers every
//! `POST /v1/traces` with `{}` and keeps the spans, each as [`Received`] describes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

/// OTLP's span kind for a span of a request another process made.
pub const KIND_SERVER: i64 = 2;

/// A running receiver; it stops with the test process.
pub struct Received {
    port: u16,
    spans: Arc<Mutex<Vec<Value>>>,
}

impl Received {
    /// Listens on a free loopback port.
    pub fn start() -> Received {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
        let port = listener.local_addr().expect("its address").port();
        let spans: Arc<Mutex<Vec<Value>>> = Arc::default();
        let kept = spans.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let kept = kept.clone();
                std::thread::spawn(move || serve(stream, &kept));
            }
        });
        Received { port, spans }
    }

    /// The variables that point an exporter here, with JSON bodies.
    pub fn exporter_env(&self) -> Vec<(String, String)> {
        vec![
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT".to_string(),
                format!("http://127.0.0.1:{}", self.port),
            ),
            (
                "OTEL_EXPORTER_OTLP_PROTOCOL".to_string(),
                "http/json".to_string(),
            ),
        ]
    }

    /// The spans received so far, each `{name, kind, trace_id, span_id, parent_id,
    /// links: [{trace_id, span_id}], attributes: {key: value}}`, ids in lowercase hex
    /// (`parent_id` null for a root).
    pub fn spans(&self) -> Vec<Value> {
        self.spans.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Polls until `predicate` holds of the spans, and answers them; panics with them
    /// after `timeout`.
    pub fn wait_for(&self, predicate: impl Fn(&[Value]) -> bool, timeout: Duration) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let spans = self.spans();
            if predicate(&spans) {
                return spans;
            }
            assert!(
                started.elapsed() < timeout,
                "the spans received were not as expected within {timeout:?}:\n{}",
                serde_json::to_string_pretty(&spans).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Answers the requests of one connection.
fn serve(stream: TcpStream, kept: &Mutex<Vec<Value>>) {
    let mut writer = match stream.try_clone() {
        Ok(w) => w,
        Err(_) => return,
    };
    let mut reader = BufReader::new(stream);
    loop {
        let mut length = 0usize;
        let mut first = true;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" && !first {
                break;
            }
            first = false;
            if let Some((k, v)) = line.split_once(':')
                && k.trim().eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if let Ok(export) = serde_json::from_slice::<Value>(&body) {
            let mut spans = kept.lock().unwrap_or_else(|p| p.into_inner());
            spans.extend(spans_of(&export));
        }
        let answer =
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// The spans of one `ExportTraceServiceRequest`.
fn spans_of(export: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    let each = |v: &Value, key: &str| v[key].as_array().cloned().unwrap_or_default();
    for resource in each(export, "resourceSpans") {
        for scope in each(&resource, "scopeSpans") {
            for span in each(&scope, "spans") {
                let hex = |v: &Value| match v.as_str() {
                    Some("") | None => Value::Null,
                    Some(s) => Value::String(s.to_ascii_lowercase()),
                };
                let links: Vec<Value> = each(&span, "links")
                    .iter()
                    .map(
                        |l| json!({ "trace_id": hex(&l["traceId"]), "span_id": hex(&l["spanId"]) }),
                    )
                    .collect();
                let mut attributes = Map::new();
                for a in each(&span, "attributes") {
                    let value = a["value"]
                        .as_object()
                        .and_then(|v| v.values().next().cloned())
                        .unwrap_or(Value::Null);
                    if let Some(key) = a["key"].as_str() {
                        attributes.insert(key.to_string(), value);
                    }
                }
                out.push(json!({
                    "name": span["name"],
                    "kind": span["kind"],
                    "trace_id": hex(&span["traceId"]),
                    "span_id": hex(&span["spanId"]),
                    "parent_id": hex(&span["parentSpanId"]),
                    "links": links,
                    "attributes": attributes,
                }));
            }
        }
    }
    out
}
