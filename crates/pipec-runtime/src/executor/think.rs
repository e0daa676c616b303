//! `think` nodes: render the prompt, call the model, validate the reply against the
//! output type, and send validation errors back up to `repairs` times. Every turn leaves
//! a `model_turn` event; a failed request leaves a `model_failed` one.

use serde_json::Value;

use super::{Executor, TryContext, TryError, TryFuture, fatal};
use crate::context::AttemptContext;
use crate::error::RuntimeError;
use crate::llm::{Message, ModelError, ModelRequest, Role, extract_json};
use crate::validate::Mode;
use pipec_diagnostic::{self as codes, Rule};
use pipec_plan::{Body, Node, Plan};
use pipec_store::{CallKind, Event, Write};

pub(crate) struct Think;

impl Executor for Think {
    fn call_kind(&self) -> CallKind {
        CallKind::Model
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

async fn run(mut cx: TryContext<'_>) -> Result<Value, TryError> {
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
            traceparent: shared
                .trace
                .as_ref()
                .map(|t| t.turn_parent(&node.name, unit.item, turn)),
        };
        let started = std::time::Instant::now();
        let reply = match m.client() {
            Some(client) => super::client_model::reply(&mut cx, model, client, &request).await?,
            None => match m.complete(&request).await {
                Ok(r) => r,
                Err(e) => {
                    let failure = ModelFailure::new(shared, model, &e);
                    cx.writes.push(failure.event(&cx, turn, model));
                    return Err(failure.into_try_error(&cx));
                }
            },
        };
        shared.trace_turn(&node.name, unit.item, turn, &request.messages, &reply);
        cx.writes
            .push(Write::Event(turn_event(&cx, model, turn, &reply, started)));
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
        messages.push(Message::text(
            Role::Assistant,
            repair_excerpt(&reply.content),
        ));
        messages.push(Message::text(
            Role::User,
            format!("{problem}\nReply again with only the corrected JSON."),
        ));
        turn += 1;
    }
}

/// The most of a reply that failed validation quoted back in a repair turn: its start
/// and its end, where a cut or a stray word usually is.
const REPAIR_HEAD: usize = 12 * 1024;
const REPAIR_TAIL: usize = 4 * 1024;

/// A reply as a repair turn quotes it back to the model: whole when it is short, else its
/// start and end with what was left out counted, so a repair request stays small however
/// large the reply was (up to the model's `max_reply_bytes`).
pub(super) fn repair_excerpt(reply: &str) -> String {
    if reply.len() <= REPAIR_HEAD + REPAIR_TAIL {
        return reply.to_string();
    }
    let head = pipec_base::source::floor_char_boundary(reply, REPAIR_HEAD);
    let tail = pipec_base::source::floor_char_boundary(reply, reply.len() - REPAIR_TAIL);
    format!(
        "{}\n[... {} bytes of the reply left out ...]\n{}",
        &reply[..head],
        tail - head,
        &reply[tail..]
    )
}

/// A model request that failed: its code and message (the `model_failed` event's too),
/// the help a person needs, and whether another try may get an answer.
pub(super) struct ModelFailure {
    rule: &'static Rule,
    message: String,
    help: Option<String>,
    transient: bool,
}

impl ModelFailure {
    pub(super) fn new(shared: &AttemptContext, model: &str, e: &ModelError) -> ModelFailure {
        let (rule, message, help, transient): (&'static Rule, String, Option<String>, bool) =
            match e {
                ModelError::Transient(e) => (
                    &codes::MODEL_UNAVAILABLE,
                    format!("the model `{model}` is not answering: {e}"),
                    None,
                    true,
                ),
                ModelError::Fatal(e) => (
                    &codes::MODEL_REFUSED,
                    format!("the model `{model}` refused the request: {e}"),
                    None,
                    false,
                ),
                ModelError::TooLarge { limit } => (
                    &codes::MODEL_REPLY_TOO_LARGE,
                    format!(
                        "the reply of the model `{model}` is larger than its `max_reply_bytes` ({limit} bytes); it was not read past that"
                    ),
                    Some(format!(
                        "lower `max_tokens`, or raise `max_reply_bytes` on the model `{model}` if replies that large are expected"
                    )),
                    false,
                ),
            };
        ModelFailure {
            rule,
            message: shared.scrubber.scrub(&message),
            help,
            transient,
        }
    }

    /// Its `model_failed` event, for turn `turn` of the node of `cx`.
    pub(super) fn event(&self, cx: &TryContext<'_>, turn: u32, model: &str) -> Write {
        Write::Event(Event::ModelFailed {
            node: cx.unit.node.name.clone(),
            item: cx.unit.item,
            turn,
            model: model.to_string(),
            code: self.rule.code.into(),
            message: self.message.clone(),
        })
    }

    /// How the try ends.
    pub(super) fn into_try_error(self, cx: &TryContext<'_>) -> TryError {
        if self.transient {
            return TryError::Transient {
                rule: self.rule,
                message: self.message,
            };
        }
        let mut e = RuntimeError::new(self.rule, self.message);
        e.help = self.help;
        TryError::Fatal(e.stored(Some(&cx.unit.node.name)))
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

/// The `model_turn` event of turn `turn` of the node's model `model`, answered by
/// `reply` since `started`: its tokens, latency, and cost at the model's prices (those
/// declared on it, else the built-in table's for the model that answered; a scripted
/// reply's tokens are estimates, priced only by a declaration).
pub(super) fn turn_event(
    cx: &TryContext<'_>,
    model: &str,
    turn: u32,
    reply: &crate::llm::ModelReply,
    started: std::time::Instant,
) -> Event {
    let prices = cx
        .shared
        .plan
        .models
        .iter()
        .find(|m| m.name == model)
        .and_then(|m| m.prices)
        .or_else(|| pipec_plan::prices::table_prices(&reply.model));
    Event::ModelTurn {
        node: cx.unit.node.name.clone(),
        item: cx.unit.item,
        turn,
        model: reply.model.clone(),
        tokens_in: reply.usage.input_tokens,
        tokens_out: reply.usage.output_tokens,
        tokens_cached: reply.usage.cached_input_tokens,
        ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        cost_usd: prices.map(|p| p.cost(reply.usage.tokens())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repair_quotes_a_long_reply_by_its_start_and_end() {
        assert_eq!(repair_excerpt("{\"a\": 1"), "{\"a\": 1");
        let long = format!("{}{}{}", "é".repeat(10_000), "x".repeat(50_000), "}");
        let quoted = repair_excerpt(&long);
        assert!(
            quoted.len() < REPAIR_HEAD + REPAIR_TAIL + 100,
            "{}",
            quoted.len()
        );
        assert!(quoted.starts_with("éé") && quoted.ends_with("xx}"));
        // 70,001 bytes: 12,288 kept at the start, the last 4,096 at the end.
        assert!(quoted.contains("[... 53617 bytes of the reply left out ...]"));
    }
}
