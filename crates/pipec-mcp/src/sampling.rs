//! A server's requests for a model's reply (`sampling/createMessage`, 2025-11-25; a
//! sampling input request of an `input_required` result, 2026-07-28), answered by the
//! model the caller gives the session ([`Sampler`]). Text only: a request with images,
//! audio or tool use is refused. The requests are read as JSON, so rmcp's sampling types
//! (deprecated by SEP-2577) stay at the edge.

use std::future::Future;
use std::pin::Pin;

use serde_json::{Value, json};

/// What a server asks a model.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingRequest {
    /// The conversation, oldest first.
    pub messages: Vec<SamplingMessage>,
    pub system: Option<String>,
    pub max_tokens: u32,
    pub temperature: Option<f64>,
}

/// One message of a sampling conversation.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingMessage {
    /// The assistant's (the model's) turn, else the user's.
    pub assistant: bool,
    pub text: String,
}

/// The model's reply.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingReply {
    pub text: String,
    /// Which model answered.
    pub model: String,
    /// `endTurn`, `maxTokens`, ... when the model says.
    pub stop_reason: Option<String>,
}

/// A boxed future of a model's reply.
pub type SampleFuture<'a> =
    Pin<Box<dyn Future<Output = Result<SamplingReply, String>> + Send + 'a>>;

/// The model a session answers sampling requests with.
pub trait Sampler: Send + Sync {
    fn sample(&self, request: SamplingRequest) -> SampleFuture<'_>;
}

/// At most this many messages are taken from one request.
const MAX_MESSAGES: usize = 256;

/// A `CreateMessageRequestParams` as pipec reads it.
pub(crate) fn request(params: &Value) -> Result<SamplingRequest, String> {
    let messages = params
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("a sampling request without messages")?;
    if messages.len() > MAX_MESSAGES {
        return Err(format!(
            "a sampling request of {} messages, more than the {MAX_MESSAGES} pipec takes",
            messages.len()
        ));
    }
    let mut out = Vec::new();
    for m in messages {
        let assistant = match m.get("role").and_then(Value::as_str) {
            Some("assistant") => true,
            Some("user") => false,
            other => return Err(format!("a sampling message whose role is {other:?}")),
        };
        let blocks: Vec<&Value> = match m.get("content") {
            Some(Value::Array(blocks)) => blocks.iter().collect(),
            Some(block) => vec![block],
            None => Vec::new(),
        };
        let mut text = String::new();
        for block in blocks {
            match (block.get("type").and_then(Value::as_str), block.get("text")) {
                (Some("text"), Some(Value::String(t))) => text.push_str(t),
                (kind, _) => {
                    return Err(format!(
                        "pipec answers text only, and a message holds {}",
                        kind.unwrap_or("a block without a type")
                    ));
                }
            }
        }
        out.push(SamplingMessage { assistant, text });
    }
    Ok(SamplingRequest {
        messages: out,
        system: params
            .get("systemPrompt")
            .and_then(Value::as_str)
            .map(str::to_string),
        max_tokens: params
            .get("maxTokens")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(1024),
        temperature: params.get("temperature").and_then(Value::as_f64),
    })
}

/// A reply as a `CreateMessageResult`.
pub(crate) fn result(reply: SamplingReply) -> Value {
    let mut out = json!({
        "role": "assistant",
        "content": { "type": "text", "text": reply.text },
        "model": reply.model,
    });
    if let Some(reason) = reply.stop_reason {
        out["stopReason"] = Value::String(reason);
    }
    out
}

/// The answer to one sampling request, as a `CreateMessageResult`.
pub(crate) async fn answer(sampler: &dyn Sampler, params: &Value) -> Result<Value, String> {
    let request = request(params)?;
    Ok(result(sampler.sample(request).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_conversation_is_read_and_anything_else_refused() {
        let read = request(&json!({
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "Describe Ada."}},
                {"role": "assistant", "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "da"}]}
            ],
            "systemPrompt": "Be brief.",
            "maxTokens": 20,
            "temperature": 0.5
        }))
        .expect("read");
        assert_eq!(
            read,
            SamplingRequest {
                messages: vec![
                    SamplingMessage {
                        assistant: false,
                        text: "Describe Ada.".into()
                    },
                    SamplingMessage {
                        assistant: true,
                        text: "Ada".into()
                    },
                ],
                system: Some("Be brief.".into()),
                max_tokens: 20,
                temperature: Some(0.5),
            }
        );
        let image = request(
            &json!({"messages": [{"role": "user", "content": {"type": "image", "data": "", "mimeType": "image/png"}}], "maxTokens": 5}),
        );
        assert!(image.is_err_and(|e| e.contains("text only")));
        assert!(request(&json!({"maxTokens": 5})).is_err());
        let reply = result(SamplingReply {
            text: "hi".into(),
            model: "scripted/fast".into(),
            stop_reason: Some("endTurn".into()),
        });
        assert_eq!(
            reply,
            json!({"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "scripted/fast", "stopReason": "endTurn"})
        );
    }
}
