//! Models: the `Model` trait the runtime calls, an OpenAI-compatible HTTP client, and a
//! scripted model that answers from a file (so examples and tests run offline).

mod openai;
mod scripted;

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use openai::{DEFAULT_MAX_REPLY_BYTES, OpenAiModel};
pub use scripted::ScriptedModel;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// A tool call the model asked for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    pub fn text(role: Role, content: impl Into<String>) -> Message {
        Message {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// A tool the model may call (name, description, JSON Schema of its arguments).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: Option<String>,
    pub parameters: Value,
}

/// One request to a model.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelRequest {
    /// Where it comes from: the scripted model picks replies by these, not by order.
    pub node: String,
    pub item: u32,
    /// The model turn within the node (repairs and agent steps count up).
    pub turn: u32,
    pub messages: Vec<Message>,
    /// For structured output: the closed JSON Schema the reply must fit.
    pub schema: Option<Value>,
    pub schema_name: String,
    pub tools: Vec<ToolSpec>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<i64>,
    /// The node's parameters the prompt was rendered from (fetched resources included).
    /// Never sent to an endpoint; the scripted model may quote them in its replies.
    pub inputs: Value,
    /// The W3C `traceparent` of the turn's span, sent to the endpoint when the run is
    /// traced.
    pub traceparent: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens, the cached ones among them.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Of `input_tokens`, those read from the provider's prompt cache.
    #[serde(default)]
    pub cached_input_tokens: u64,
}

impl Usage {
    pub fn tokens(&self) -> pipec_plan::prices::Tokens {
        pipec_plan::prices::Tokens {
            input: self.input_tokens,
            output: self.output_tokens,
            cached_input: self.cached_input_tokens,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelReply {
    pub content: String,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default)]
    pub usage: Usage,
    /// Which model answered (provider and name), for the record.
    #[serde(default)]
    pub model: String,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ModelError {
    /// Worth another try later (rate limits, server errors, timeouts, connection errors).
    Transient(String),
    /// Will not get better by trying again (bad request, authentication, no such reply).
    Fatal(String),
    /// The reply is larger than the model's `max_reply_bytes` (`limit`); it was not read
    /// past that.
    TooLarge { limit: u64 },
}

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelError::Transient(m) | ModelError::Fatal(m) => f.write_str(m),
            ModelError::TooLarge { limit } => {
                write!(f, "the reply is larger than {limit} bytes")
            }
        }
    }
}

pub type ModelFuture<'a> =
    Pin<Box<dyn Future<Output = Result<ModelReply, ModelError>> + Send + 'a>>;

/// A model endpoint.
pub trait Model: Send + Sync {
    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a>;

    /// The model is answered from outside the run (`provider = "client"`): its requests
    /// wait at a gate for the reply.
    fn client(&self) -> Option<&ClientModel> {
        None
    }
}

/// The calling client's model (`provider = "client"`): each request waits at a gate of
/// the thread for its reply, which the client that called a served pipeline gives
/// through MCP sampling, and anyone else with `pipec answer`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientModel {
    /// The declared `name`: a hint to the client of the model wanted.
    pub hint: Option<String>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<i64>,
}

impl Model for ClientModel {
    fn complete<'a>(&'a self, _request: &'a ModelRequest) -> ModelFuture<'a> {
        Box::pin(async {
            Err(ModelError::Fatal(
                "the client's model is answered at a gate, not called".into(),
            ))
        })
    }

    fn client(&self) -> Option<&ClientModel> {
        Some(self)
    }
}

/// Takes the JSON out of a model reply: the whole text, or the first fenced block.
pub fn extract_json(text: &str) -> Result<Value, String> {
    let trimmed = text.trim();
    if let Ok(v) = serde_json::from_str(trimmed) {
        return Ok(v);
    }
    if let Some(start) = trimmed.find("```") {
        let after = &trimmed[start + 3..];
        let after = after.strip_prefix("json").unwrap_or(after);
        if let Some(end) = after.find("```")
            && let Ok(v) = serde_json::from_str(after[..end].trim())
        {
            return Ok(v);
        }
    }
    if let (Some(a), Some(b)) = (trimmed.find('{'), trimmed.rfind('}'))
        && a < b
        && let Ok(v) = serde_json::from_str(&trimmed[a..=b])
    {
        return Ok(v);
    }
    serde_json::from_str::<Value>(trimmed).map_err(|e| format!("the reply is not JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_found_in_fences_and_prose() {
        assert_eq!(
            extract_json("{\"a\": 1}"),
            Ok(serde_json::json!({ "a": 1 }))
        );
        assert_eq!(
            extract_json("Here:\n```json\n{\"a\": 2}\n```"),
            Ok(serde_json::json!({ "a": 2 }))
        );
        assert_eq!(
            extract_json("Sure! {\"a\": 3} hope it helps"),
            Ok(serde_json::json!({ "a": 3 }))
        );
        assert!(extract_json("no json here").is_err());
    }
}
