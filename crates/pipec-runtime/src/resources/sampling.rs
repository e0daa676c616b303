//! A server's requests for a model's reply (MCP sampling), answered by the model its
//! declaration names (`sampling = fast`): the run's model, with its overrides, scripted
//! replies and settings. The model's declared `temperature` wins over the server's, and a
//! reply is at most the model's `max_tokens` (else [`DEFAULT_MAX_TOKENS`]) long, whatever
//! the server asks. A model's failure reaches the server as a plain refusal (its message
//! may name an endpoint). The scripted model picks a reply by the node
//! `SERVER:sampling` and the request's number in the attempt.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::Value;

use crate::llm::{Message, Model, ModelRequest, Role};
use pipec_mcp::{SampleFuture, Sampler, SamplingReply, SamplingRequest};

/// A reply's length in tokens when the model declares no `max_tokens`.
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 4096;

/// A declared model answering one server's sampling requests.
pub(crate) struct ModelSampler {
    pub server: String,
    pub model: Arc<dyn Model>,
    /// The model's declared temperature, which the server's does not override.
    pub temperature: Option<f64>,
    /// The model's declared `max_tokens`, the most a server may ask for.
    pub max_tokens: Option<i64>,
    /// Requests so far (the scripted model's turn).
    pub turns: AtomicU32,
}

impl Sampler for ModelSampler {
    fn sample(&self, request: SamplingRequest) -> SampleFuture<'_> {
        Box::pin(async move {
            let mut messages = Vec::new();
            if let Some(system) = request.system {
                messages.push(Message::text(Role::System, system));
            }
            for m in request.messages {
                let role = if m.assistant {
                    Role::Assistant
                } else {
                    Role::User
                };
                messages.push(Message::text(role, m.text));
            }
            let asked = ModelRequest {
                node: format!("{}:sampling", self.server),
                item: 0,
                turn: self.turns.fetch_add(1, Ordering::SeqCst),
                messages,
                schema: None,
                schema_name: String::new(),
                tools: Vec::new(),
                temperature: self.temperature.or(request.temperature),
                max_tokens: Some(capped(request.max_tokens, self.max_tokens)),
                inputs: Value::Null,
                traceparent: None,
            };
            // The model's own error may name its endpoint: the server hears only that
            // the request failed.
            let reply = self
                .model
                .complete(&asked)
                .await
                .map_err(|_| "the model pipec answers with failed".to_string())?;
            Ok(SamplingReply {
                text: reply.content,
                model: reply.model,
                stop_reason: Some("endTurn".to_string()),
            })
        })
    }
}

/// The reply's length: what the server asks, at most what the model declares (else
/// [`DEFAULT_MAX_TOKENS`]).
fn capped(asked: u32, declared: Option<i64>) -> i64 {
    let most = declared.unwrap_or(i64::from(DEFAULT_MAX_TOKENS)).max(1);
    i64::from(asked).clamp(1, most)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_asks_at_most_the_declared_length() {
        assert_eq!(capped(1_000_000, None), i64::from(DEFAULT_MAX_TOKENS));
        assert_eq!(capped(1_000_000, Some(300)), 300);
        assert_eq!(capped(20, Some(300)), 20);
        assert_eq!(capped(0, None), 1);
    }
}
