//! Any OpenAI-compatible Chat Completions endpoint (OpenAI, vLLM, Ollama, llama.cpp):
//! structured output through `response_format: json_schema` where the server takes it,
//! plain JSON instructions where it does not; retries with backoff on 429 and 5xx.
//!
//! A reply is read up to the model's `max_reply_bytes` and no further (a larger one is
//! [`ModelError::TooLarge`]), so an endpoint cannot grow pipec's memory without bound;
//! and no redirect is followed, as the official SDKs follow none: a 307 or 308 would
//! send the prompt, and the key with it where the origin stays, to whatever address
//! the answer names.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::{
    Message, Model, ModelError, ModelFuture, ModelReply, ModelRequest, Role, ToolCall, Usage,
};

/// The largest reply read from a model that declares no `max_reply_bytes`.
pub const DEFAULT_MAX_REPLY_BYTES: u64 = 8_000_000;

/// The most of an error reply read: its message is all that is shown of it.
const MAX_ERROR_BYTES: u64 = 64 * 1024;

pub struct OpenAiModel {
    client: reqwest::Client,
    max_reply_bytes: u64,
    base_url: String,
    api_key: Option<String>,
    model: String,
    temperature: Option<f64>,
    max_tokens: Option<i64>,
    retries: u32,
    extra: Map<String, Value>,
    /// Set once the server refused `response_format: json_schema`.
    no_json_schema: AtomicBool,
}

fn install_crypto() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

impl OpenAiModel {
    pub fn new(
        base_url: Option<&str>,
        api_key: Option<String>,
        model: &str,
    ) -> Result<OpenAiModel, String> {
        install_crypto();
        let client = client(Duration::from_secs(120))
            .map_err(|e| format!("cannot create an HTTP client: {e}"))?;
        Ok(OpenAiModel {
            client,
            max_reply_bytes: DEFAULT_MAX_REPLY_BYTES,
            base_url: base_url
                .unwrap_or("https://api.openai.com/v1")
                .trim_end_matches('/')
                .to_string(),
            api_key,
            model: model.to_string(),
            temperature: None,
            max_tokens: None,
            retries: 3,
            extra: Map::new(),
            no_json_schema: AtomicBool::new(false),
        })
    }

    pub fn with_settings(
        mut self,
        temperature: Option<f64>,
        max_tokens: Option<i64>,
        retries: Option<i64>,
        timeout_ms: Option<u64>,
        extra: &Value,
    ) -> OpenAiModel {
        self.temperature = temperature;
        self.max_tokens = max_tokens;
        if let Some(r) = retries {
            self.retries = r.clamp(0, 10) as u32;
        }
        if let Some(ms) = timeout_ms
            && let Ok(c) = client(Duration::from_millis(ms))
        {
            self.client = c;
        }
        if let Value::Object(m) = extra {
            self.extra = m.clone();
        }
        self
    }

    /// The largest reply read (bytes of the HTTP body); a larger one is
    /// [`ModelError::TooLarge`].
    pub fn max_reply_bytes(mut self, max: u64) -> OpenAiModel {
        self.max_reply_bytes = max;
        self
    }

    fn body(&self, req: &ModelRequest, json_schema: bool) -> Value {
        let mut messages: Vec<Value> = Vec::new();
        if let (Some(schema), false) = (&req.schema, json_schema) {
            messages.push(json!({
                "role": "system",
                "content": format!("Reply with one JSON value and nothing else. It must match this JSON Schema:\n{}", serde_json::to_string(schema).unwrap_or_default())
            }));
        }
        messages.extend(req.messages.iter().map(message_json));
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model));
        body.insert("messages".into(), Value::Array(messages));
        if let Some(t) = req.temperature.or(self.temperature) {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(m) = req.max_tokens.or(self.max_tokens) {
            body.insert("max_tokens".into(), json!(m));
        }
        if let (Some(schema), true) = (&req.schema, json_schema) {
            body.insert(
                "response_format".into(),
                json!({ "type": "json_schema", "json_schema": { "name": req.schema_name, "schema": schema, "strict": true } }),
            );
        }
        if !req.tools.is_empty() {
            body.insert(
                "tools".into(),
                Value::Array(
                    req.tools
                        .iter()
                        .map(|t| {
                            pipec_schema::shown::function_tool(
                                &t.name,
                                t.description.as_deref(),
                                &t.parameters,
                            )
                        })
                        .collect(),
                ),
            );
        }
        for (k, v) in &self.extra {
            body.insert(k.clone(), v.clone());
        }
        Value::Object(body)
    }

    async fn send(&self, body: &Value, traceparent: Option<&str>) -> Result<Value, Failure> {
        let url = format!("{}/chat/completions", self.base_url);
        let mut request = self.client.post(&url).json(body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        // W3C trace context: the endpoint's own tracing joins the run's trace.
        if let Some(tp) = traceparent {
            request = request.header("traceparent", tp);
        }
        let failed = |e: reqwest::Error| {
            let kind = if e.is_timeout() {
                "timed out"
            } else if e.is_connect() {
                "could not connect"
            } else {
                "failed"
            };
            Failure::Http(None, format!("the request to {url} {kind}"), None)
        };
        let mut response = request.send().await.map_err(failed)?;
        let status = response.status().as_u16();
        if response.status().is_redirection() {
            let to = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(|l| format!(" to {}", l.chars().take(300).collect::<String>()))
                .unwrap_or_default();
            return Err(Failure::Http(
                Some(status),
                format!(
                    "HTTP {status}: {url} redirects{to}, which is not followed; make `base_url` the address that answers"
                ),
                None,
            ));
        }
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map(|s| Duration::from_secs_f64(s.clamp(0.0, 60.0)));
        let ok = (200..300).contains(&status);
        // A reply that says it is too large is not read at all.
        if ok
            && response
                .content_length()
                .is_some_and(|n| n > self.max_reply_bytes)
        {
            return Err(Failure::TooLarge);
        }
        let cap = if ok {
            self.max_reply_bytes
        } else {
            MAX_ERROR_BYTES
        };
        let bytes = match read_capped(&mut response, cap).await {
            Ok(Read::Whole(bytes)) => bytes,
            // Only the start of an error reply is shown anyway.
            Ok(Read::Cut(bytes)) if !ok => bytes,
            Ok(Read::Cut(_)) => return Err(Failure::TooLarge),
            Err(e) => {
                return Err(Failure::Http(
                    Some(status),
                    format!("cannot read the reply: {}", e.without_url()),
                    None,
                ));
            }
        };
        if !ok {
            let text = String::from_utf8_lossy(&bytes);
            let detail = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| {
                    v.pointer("/error/message")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
                .unwrap_or_else(|| text.chars().take(300).collect());
            return Err(Failure::Http(
                Some(status),
                format!("HTTP {status}: {detail}"),
                retry_after,
            ));
        }
        serde_json::from_slice(&bytes)
            .map_err(|e| Failure::Http(Some(status), format!("the reply is not JSON: {e}"), None))
    }

    async fn complete_inner(&self, req: &ModelRequest) -> Result<ModelReply, ModelError> {
        let mut attempt = 0u32;
        loop {
            let use_schema = req.schema.is_some() && !self.no_json_schema.load(Ordering::Relaxed);
            let body = self.body(req, use_schema);
            match self.send(&body, req.traceparent.as_deref()).await {
                Ok(v) => return parse_reply(&v, &self.model),
                Err(Failure::TooLarge) => {
                    return Err(ModelError::TooLarge {
                        limit: self.max_reply_bytes,
                    });
                }
                Err(Failure::Http(Some(400), msg, _))
                    if use_schema
                        && (msg.contains("response_format") || msg.contains("json_schema")) =>
                {
                    // The server does not do structured output: ask in words instead.
                    self.no_json_schema.store(true, Ordering::Relaxed);
                }
                Err(Failure::Http(status, msg, retry_after)) => {
                    let transient = matches!(status, None | Some(408) | Some(409) | Some(429))
                        || status.is_some_and(|s| s >= 500);
                    if !transient {
                        return Err(ModelError::Fatal(msg));
                    }
                    if attempt >= self.retries {
                        return Err(ModelError::Transient(format!(
                            "{msg} (after {} tries)",
                            attempt + 1
                        )));
                    }
                    let backoff = retry_after
                        .unwrap_or_else(|| Duration::from_millis(250u64 << attempt.min(5)));
                    tokio::time::sleep(backoff).await;
                    attempt += 1;
                }
            }
        }
    }
}

/// The client of a model: no redirect followed, `timeout` per request.
fn client(timeout: Duration) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
}

/// Why a request got no reply to use.
enum Failure {
    /// The HTTP status when there was one, the message, and the wait the server asked
    /// for before another try.
    Http(Option<u16>, String, Option<Duration>),
    /// The reply is larger than the model's `max_reply_bytes`.
    TooLarge,
}

/// A body read up to a cap.
enum Read {
    Whole(Vec<u8>),
    /// The first `cap` bytes: there was more, which was not read.
    Cut(Vec<u8>),
}

/// Reads `response`'s body while it streams in, never holding more than `cap` bytes.
async fn read_capped(response: &mut reqwest::Response, cap: u64) -> reqwest::Result<Read> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = (cap as usize).saturating_sub(bytes.len());
        if chunk.len() > room {
            bytes.extend_from_slice(&chunk[..room]);
            return Ok(Read::Cut(bytes));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Read::Whole(bytes))
}

fn message_json(m: &Message) -> Value {
    let role = match m.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let mut v = json!({ "role": role, "content": m.content });
    if !m.tool_calls.is_empty() {
        v["tool_calls"] = Value::Array(
            m.tool_calls
                .iter()
                .map(|c| json!({ "id": c.id, "type": "function", "function": { "name": c.name, "arguments": c.arguments.to_string() } }))
                .collect(),
        );
    }
    if let Some(id) = &m.tool_call_id {
        v["tool_call_id"] = json!(id);
    }
    v
}

fn parse_reply(v: &Value, model: &str) -> Result<ModelReply, ModelError> {
    let message = v
        .pointer("/choices/0/message")
        .ok_or_else(|| ModelError::Fatal("the reply has no `choices[0].message`".into()))?;
    let content = message
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let tool_calls = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .map(|c| ToolCall {
                    id: c
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    name: c
                        .pointer("/function/name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    arguments: c
                        .pointer("/function/arguments")
                        .and_then(Value::as_str)
                        .and_then(|a| serde_json::from_str(a).ok())
                        .unwrap_or(Value::Object(Map::new())),
                })
                .collect()
        })
        .unwrap_or_default();
    let usage = Usage {
        input_tokens: v
            .pointer("/usage/prompt_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        output_tokens: v
            .pointer("/usage/completion_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        cached_input_tokens: v
            .pointer("/usage/prompt_tokens_details/cached_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
    };
    Ok(ModelReply {
        content,
        tool_calls,
        usage,
        model: format!("openai:{model}"),
    })
}

impl Model for OpenAiModel {
    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a> {
        Box::pin(self.complete_inner(request))
    }
}
