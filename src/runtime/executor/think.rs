//! `think` nodes: render the prompt, call the model, validate the reply against the
//! output type, and send validation errors back up to `repairs` times. Every turn leaves
//! a `model_turn` event; a failed request leaves a `model_failed` one.

use serde_json::Value;

use super::{Executor, TryContext, TryError, TryFuture, fatal};
use crate::diagnostic::{self as codes, Rule};
use crate::llm::{Message, ModelError, ModelRequest, Role, extract_json};
use crate::plan::{Body, Node, Plan};
use crate::runtime::attempt::event_write;
use crate::runtime::validate::Mode;
use crate::store::Event;

pub(crate) struct Think;

impl Executor for Think {
    fn call_kind(&self) -> &'static str {
        "model"
    }

    fn journaled(&self, _plan: &Plan, _node: &Node) -> bool {
        false
    }

    fn target(&self, node: &Node) -> String {
        match &node.body {
            Body::Model { model, .. } => model.clone(),
            _ => String::new(),
        }
    }

    fn failure_rule(&self) -> &'static Rule {
        &codes::MODEL_UNAVAILABLE
    }

    fn run<'a>(&'a self, cx: TryContext<'a>) -> TryFuture<'a> {
        Box::pin(run(cx))
    }
}

async fn run(cx: TryContext<'_>) -> Result<Value, TryError> {
    let shared = cx.shared;
    let unit = cx.unit;
    let node = &unit.node;
    let Body::Model {
        model,
        prompt,
        repairs,
        temperature,
        max_tokens,
        structured,
        ..
    } = &node.body
    else {
        return Err(fatal(
            &cx,
            &codes::INTERNAL_ERROR,
            format!("`{}` is not a model node", node.name),
        ));
    };
    let Some(m) = shared.models.get(model) else {
        return Err(fatal(
            &cx,
            &codes::CONFIG_MISSING,
            format!("no model `{model}` is available"),
        ));
    };
    let closed = shared.validators.full_schema(&node.output, Mode::Strict);
    let mut messages = super::render_prompt(&cx, prompt, &closed)?;
    let repairs = repairs.unwrap_or(2) as u32;
    let mut turn = 0u32;
    loop {
        let request = ModelRequest {
            node: node.name.clone(),
            item: unit.item,
            turn,
            messages: messages.clone(),
            schema: structured.then(|| closed.clone()),
            schema_name: schema_name(&node.output_type),
            tools: Vec::new(),
            temperature: *temperature,
            max_tokens: *max_tokens,
            inputs: Value::Object(unit.params.clone().into_iter().collect()),
        };
        let reply = match m.complete(&request).await {
            Ok(r) => r,
            Err(e) => {
                let (rule, message): (&'static Rule, String) = match &e {
                    ModelError::Transient(e) => (
                        &codes::MODEL_UNAVAILABLE,
                        format!("the model `{model}` is not answering: {e}"),
                    ),
                    ModelError::Fatal(e) => (
                        &codes::MODEL_REFUSED,
                        format!("the model `{model}` refused the request: {e}"),
                    ),
                };
                let message = shared.scrubber.scrub(&message);
                cx.writes.push(event_write(Event::ModelFailed {
                    node: node.name.clone(),
                    item: unit.item,
                    turn,
                    model: model.clone(),
                    code: rule.code.into(),
                    message: message.clone(),
                }));
                return Err(match e {
                    ModelError::Transient(_) => TryError::Transient { rule, message },
                    ModelError::Fatal(_) => fatal(&cx, rule, message),
                });
            }
        };
        cx.writes.push(event_write(Event::ModelTurn {
            node: node.name.clone(),
            item: unit.item,
            turn,
            model: reply.model.clone(),
            tokens_in: reply.usage.input_tokens,
            tokens_out: reply.usage.output_tokens,
        }));
        if !structured {
            return Ok(Value::String(reply.content));
        }
        let problem = match extract_json(&reply.content) {
            Ok(v) => match shared.validators.check(&node.output, &v, Mode::Strict) {
                Ok(()) => return Ok(v),
                Err(e) => format!("The reply does not match the schema: {e}"),
            },
            Err(e) => format!("The reply is not valid JSON: {e}"),
        };
        if turn >= repairs {
            let last: String = reply.content.chars().take(500).collect();
            return Err(fatal(
                &cx,
                &codes::MODEL_OUTPUT_INVALID,
                shared.scrubber.scrub(&format!(
                    "the model's output does not fit `{}` after {} repairs: {problem}; last reply: {last}",
                    node.output_type, repairs
                )),
            ));
        }
        messages.push(Message::text(Role::Assistant, reply.content));
        messages.push(Message::text(
            Role::User,
            format!("{problem}\nReply again with only the corrected JSON."),
        ));
        turn += 1;
    }
}

/// A schema name the Chat Completions API accepts (letters, digits, `_`, `-`).
pub(super) fn schema_name(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() { "output".into() } else { s }
}
