//! A `think` node whose model is the calling client's (`provider = "client"`): each turn
//! is asked from outside the run. The turn becomes a pending gate named after the node
//! (`NODE:gG:iI:model1`, `...:model2` for a repair turn) whose row keeps the request as
//! MCP sampling's `sampling/createMessage` params; the thread waits there like at any
//! gate. The client that called a served pipeline answers it through sampling; anyone
//! else with `pipec answer`, the reply as `{"content": {"type": "text", "text": "..."}}`.
//! Once answered, in this process or another, the try runs again and the turn reads it.

use serde_json::{Value, json};

use super::{TryContext, TryError, fatal};
use crate::client_ask::ClientAsk;
use crate::llm::{ClientModel, ModelReply, ModelRequest, Role, Usage};
use pipec_diagnostic as codes;
use pipec_store::{Event, GateRec, GateState, Write, ids};

/// The reply's size when neither the node nor the model bounds it (MCP sampling requires
/// a bound).
const DEFAULT_MAX_TOKENS: i64 = 4096;

/// What an answer must be: a sampling result whose content is text (one block, or a
/// list of blocks).
fn reply_schema() -> Value {
    let text = json!({
        "type": "object",
        "properties": { "type": { "const": "text" }, "text": { "type": "string" } },
        "required": ["type", "text"],
        "additionalProperties": true
    });
    json!({
        "type": "object",
        "properties": {
            "role": { "const": "assistant" },
            "content": { "anyOf": [text, { "type": "array", "items": text }] },
            "model": { "type": "string" },
            "stopReason": { "type": "string" },
            "_meta": { "type": "object" }
        },
        "required": ["content"],
        "additionalProperties": true
    })
}

/// The request as `sampling/createMessage` params: the system messages as its system
/// prompt, the others in order, the bound on the reply, and the declared model's name as
/// a hint.
fn params(client: &ClientModel, request: &ModelRequest) -> Value {
    let system: Vec<&str> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| m.content.as_str())
        .collect();
    let messages: Vec<Value> = request
        .messages
        .iter()
        .filter_map(|m| {
            let role = match m.role {
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::System | Role::Tool => return None,
            };
            Some(json!({ "role": role, "content": { "type": "text", "text": m.content } }))
        })
        .collect();
    let max_tokens = request
        .max_tokens
        .or(client.max_tokens)
        .unwrap_or(DEFAULT_MAX_TOKENS);
    let mut params = json!({ "messages": messages, "maxTokens": max_tokens });
    if !system.is_empty() {
        params["systemPrompt"] = json!(system.join("\n\n"));
    }
    if let Some(t) = request.temperature.or(client.temperature) {
        params["temperature"] = json!(t);
    }
    if let Some(hint) = &client.hint {
        params["modelPreferences"] = json!({ "hints": [{ "name": hint }] });
    }
    params
}

/// The text of an answer: its text block, or its text blocks joined.
fn text_of(answer: &Value) -> Option<String> {
    match answer.get("content")? {
        Value::Array(blocks) => Some(
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
        ),
        block => block
            .get("text")
            .and_then(Value::as_str)
            .map(str::to_string),
    }
}

/// The reply to this turn of `cx`'s node: the answer its gate holds, or, before there is
/// one, the gate opened and the try waiting at it.
pub(crate) async fn reply(
    cx: &mut TryContext<'_>,
    model: &str,
    client: &ClientModel,
    request: &ModelRequest,
) -> Result<ModelReply, TryError> {
    let shared = cx.shared;
    let unit = cx.unit;
    let node = &unit.node.name;
    let gate = format!(
        "{node}:g{}:i{}:model{}",
        unit.generation,
        unit.item,
        request.turn + 1
    );
    let state = shared
        .store
        .load(&shared.thread_id)
        .await
        .map_err(|e| TryError::Fatal(crate::error::RuntimeError::from(e).stored(Some(node))))?;
    match state.gates.get(&gate) {
        Some(rec) if rec.state == GateState::Answered => {
            let answer = rec.answer.clone().unwrap_or(Value::Null);
            let Some(content) = text_of(&answer) else {
                return Err(fatal(
                    cx,
                    &codes::MODEL_OUTPUT_INVALID,
                    format!("the answer to `{gate}` has no text content"),
                ));
            };
            let said = answer.get("model").and_then(Value::as_str).unwrap_or(model);
            return Ok(ModelReply {
                content,
                tool_calls: Vec::new(),
                usage: Usage::default(),
                model: said.to_string(),
            });
        }
        Some(rec) => {
            return Err(TryError::Waiting {
                gate,
                rec: Box::new(rec.clone()),
            });
        }
        None => {}
    }
    // What the request says may hold a secret a prompt was given: the row keeps it
    // scrubbed, as every stored value.
    let mut asked = params(client, request);
    shared.scrubber.scrub_value(&mut asked);
    let message = format!(
        "`{node}` asks the model `{model}`, the calling client's: answer with its reply, {{\"content\": {{\"type\": \"text\", \"text\": \"...\"}}}}."
    );
    let rec = GateRec {
        node: node.clone(),
        state: GateState::Pending,
        message: message.clone(),
        schema: reply_schema(),
        pending_ms: ids::now_ms(),
        deadline_ms: None,
        answer: None,
        answered_ms: 0,
        answered_by: None,
        ask: Some(ClientAsk::Model(asked).row()),
    };
    let mut writes = std::mem::take(cx.writes);
    writes.push(Write::Gate(gate.clone(), rec.clone()));
    writes.push(Write::Event(Event::GatePending {
        gate: gate.clone(),
        message,
        deadline_ms: None,
    }));
    if let Err(e) = shared.commit(writes).await {
        return Err(TryError::Fatal(e.stored(Some(node))));
    }
    Err(TryError::Waiting {
        gate,
        rec: Box::new(rec),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Message;

    #[test]
    fn a_request_is_sampling_params_with_its_system_prompt_bound_and_hint() {
        let client = ClientModel {
            hint: Some("claude-sonnet".into()),
            temperature: Some(0.2),
            max_tokens: None,
        };
        let request = ModelRequest {
            node: "n".into(),
            item: 0,
            turn: 0,
            messages: vec![
                Message::text(Role::System, "Be brief."),
                Message::text(Role::User, "What is the capital of France?"),
            ],
            schema: None,
            schema_name: String::new(),
            tools: Vec::new(),
            temperature: None,
            max_tokens: Some(100),
            inputs: Value::Null,
            traceparent: None,
        };
        assert_eq!(
            params(&client, &request),
            json!({
                "messages": [{ "role": "user", "content": { "type": "text", "text": "What is the capital of France?" } }],
                "maxTokens": 100,
                "systemPrompt": "Be brief.",
                "temperature": 0.2,
                "modelPreferences": { "hints": [{ "name": "claude-sonnet" }] }
            })
        );
    }

    #[test]
    fn an_answer_gives_its_text_from_one_block_or_several() {
        assert_eq!(
            text_of(&json!({ "content": { "type": "text", "text": "Paris" } })).as_deref(),
            Some("Paris")
        );
        assert_eq!(
            text_of(&json!({ "content": [{ "type": "text", "text": "Par" }, { "type": "text", "text": "is" }] })).as_deref(),
            Some("Paris")
        );
        assert_eq!(text_of(&json!({ "content": { "type": "image" } })), None);
    }
}
