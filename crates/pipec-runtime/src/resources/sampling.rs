//! A server's requests for a model's reply (MCP sampling), answered by the model its
//! declaration names (`sampling = fast`): the run's model, with its overrides, scripted
//! replies and limits. The scripted model picks a reply by the node `SERVER:sampling` and
//! the request's number in the attempt.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::Value;

use crate::llm::{Message, Model, ModelRequest, Role};
use pipec_mcp::{SampleFuture, Sampler, SamplingReply, SamplingRequest};

/// A declared model answering one server's sampling requests.
pub(crate) struct ModelSampler {
    pub server: String,
    pub model: Arc<dyn Model>,
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
                temperature: request.temperature,
                max_tokens: Some(i64::from(request.max_tokens)),
                inputs: Value::Null,
            };
            let reply = self
                .model
                .complete(&asked)
                .await
                .map_err(|e| e.to_string())?;
            Ok(SamplingReply {
                text: reply.content,
                model: reply.model,
                stop_reason: Some("endTurn".to_string()),
            })
        })
    }
}
