//! Any OpenAI-compatible Chat Completions endpoint (OpenAI, vLLM, Ollama, llama.cpp):
//! structured output through `response_format: json_schema` where the server takes it,
//! plain JSON instructions where it does not; retries with backoff on 429 and 5xx.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::{
    Message, Model, ModelError, ModelFuture, ModelReply, ModelRequest, Role, ToolCall, Usage,
};

pub struct OpenAiModel {
    client: reqwest::Client,
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
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("cannot create an HTTP client: {e}"))?;
        Ok(OpenAiModel {
            client,
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
            && let Ok(c) = reqwest::Client::builder()
                .timeout(Duration::from_millis(ms))
                .connect_timeout(Duration::from_secs(10))
                .build()
        {
            self.client = c;
        }
        if let Value::Object(m) = extra {
            self.extra = m.clone();
        }
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
                        .map(|t| json!({ "type": "function", "function": { "name": t.name, "description": t.description, "parameters": t.parameters } }))
                        .collect(),
                ),
            );
        }
        for (k, v) in &self.extra {
            body.insert(k.clone(), v.clone());
        }
        Value::Object(body)
    }

    async fn send(&self, body: &Value) -> Result<Value, (Option<u16>, String, Option<Duration>)> {
        let url = format!("{}/chat/completions", self.base_url);
        let mut request = self.client.post(&url).json(body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| {
            let kind = if e.is_timeout() {
                "timed out"
            } else if e.is_connect() {
                "could not connect"
            } else {
                "failed"
            };
            (None, format!("the request to {url} {kind}"), None)
        })?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map(|s| Duration::from_secs_f64(s.clamp(0.0, 60.0)));
        let text = response
            .text()
            .await
            .map_err(|e| (Some(status), format!("cannot read the reply: {e}"), None))?;
        if !(200..300).contains(&status) {
            let detail = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| {
                    v.pointer("/error/message")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
                .unwrap_or_else(|| text.chars().take(300).collect());
            return Err((
                Some(status),
                format!("HTTP {status}: {detail}"),
                retry_after,
            ));
        }
        serde_json::from_str(&text)
            .map_err(|e| (Some(status), format!("the reply is not JSON: {e}"), None))
    }

    async fn complete_inner(&self, req: &ModelRequest) -> Result<ModelReply, ModelError> {
        let mut attempt = 0u32;
        loop {
            let use_schema = req.schema.is_some() && !self.no_json_schema.load(Ordering::Relaxed);
            let body = self.body(req, use_schema);
            match self.send(&body).await {
                Ok(v) => return parse_reply(&v, &self.model),
                Err((Some(400), msg, _))
                    if use_schema
                        && (msg.contains("response_format") || msg.contains("json_schema")) =>
                {
                    // The server does not do structured output: ask in words instead.
                    self.no_json_schema.store(true, Ordering::Relaxed);
                }
                Err((status, msg, retry_after)) => {
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
