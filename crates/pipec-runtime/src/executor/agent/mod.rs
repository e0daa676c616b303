//! `agent` and `act` nodes: a model in a loop with tools. Each model turn is a journal
//! row, committed before any of the turn's tool calls runs, and the conversation is
//! rebuilt from those rows: a resume (or a retry) continues it and never asks the model
//! again for a turn it already answered. The turn's tool calls are rows of their own
//! (`node:gG:iI:sTURN:cN`, N from 1), each committed as its call finishes, so a resume
//! never makes again a call that finished: a tool that is neither read-only nor idempotent
//! gets its `started` row first, so a crash in flight blocks the thread instead of
//! repeating the effect; `limits` caps calls per tool; a tool in `approve` pauses the
//! node at a gate named after the call, showing the exact arguments, and runs exactly
//! those once it is approved. Readers are tools that read a resource template.
//!
//! After `max_steps` turns that still call tools, the model is asked once more, without
//! tools, for its final answer.
//!
//! This file is the loop; `tool_call.rs` one call of a turn (`ToolCall`), `approval.rs`
//! its gate, `reader.rs` a reader's read, `transcript.rs` the rows the conversation is
//! rebuilt from.

mod approval;
mod reader;
mod tool_call;
mod transcript;

use std::collections::BTreeMap;

use serde_json::Value;

use super::think::ModelFailure;
use super::{Executor, TryContext, TryError, TryFuture, fatal};
use crate::llm::{Message, ModelError, ModelRequest, Role, ToolSpec, extract_json};
use crate::resources::manifest;
use crate::validate::Mode;
use pipec_diagnostic::{self as codes, Rule};
use pipec_plan::{Body, Node, Plan, Tool};
use pipec_store::CallKind;
use tool_call::{ToolCall, Tools};
use transcript::Rows;

/// A tool loop: `agent` (read-only tools) or `act` (tools with effects).
pub(crate) struct Loop;

/// The default number of model turns that may call tools.
const DEFAULT_MAX_STEPS: u64 = 10;

impl Executor for Loop {
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

/// The answer an approval gate takes.
fn approval_schema() -> Value {
    pipec_schema::build::record(
        [
            ("approved", pipec_schema::build::kind("boolean")),
            ("note", pipec_schema::build::kind_or_null("string")),
        ],
        ["approved"],
    )
}

async fn run(mut cx: TryContext<'_>) -> Result<Value, TryError> {
    let shared = cx.shared;
    let unit = cx.unit;
    let node = &unit.node;
    let Body::Model {
        model,
        prompt,
        tools,
        limits,
        approve,
        max_steps,
        tool_timeout_ms,
        repairs,
        temperature,
        max_tokens,
        structured,
    } = &node.body
    else {
        return Err(fatal(
            &cx,
            &codes::INTERNAL_ERROR,
            format!("`{}` is not a model node", node.name),
        ));
    };
    let Some(m) = shared.models.get(model).cloned() else {
        return Err(fatal(
            &cx,
            &codes::CONFIG_MISSING,
            format!("no model `{model}` is available"),
        ));
    };
    let plan = shared.plan.clone();
    let declared: Vec<&Tool> = tools
        .iter()
        .filter_map(|t| plan.tools.iter().find(|x| &x.name == t))
        .collect();
    let toolbox = Tools {
        declared,
        limits,
        approve,
        timeout_ms: *tool_timeout_ms,
    };
    let specs: Vec<ToolSpec> = toolbox
        .declared
        .iter()
        .map(|t| ToolSpec {
            name: t.name.clone(),
            description: t.description.clone(),
            // With the named types it uses: a model sees one self-contained schema.
            parameters: shared.validators.shown_schema(&t.input_schema),
        })
        .collect();
    let closed = shared.validators.full_schema(&node.output, Mode::Strict);
    let mut messages = super::render_prompt(&cx, prompt, &closed)?;
    let max_steps = max_steps.unwrap_or(DEFAULT_MAX_STEPS) as u32;
    let repairs = repairs.unwrap_or(2) as u32;
    // The rows of this conversation so far, by key.
    let mut rows = Rows::of(&unit.calls);
    let mut used: BTreeMap<String, u64> = BTreeMap::new();
    let mut repaired = 0u32;
    let mut turn = 0u32;
    loop {
        let exhausted = turn >= max_steps;
        let reply = match transcript::stored_reply(&cx, &rows, turn) {
            Some(stored) => stored?,
            None => {
                if exhausted && turn == max_steps {
                    messages.push(Message::text(
                        Role::User,
                        "You have used every step you had for tools. Answer now with the final JSON, and call no more tools.",
                    ));
                }
                let request = ModelRequest {
                    node: node.name.clone(),
                    item: unit.item,
                    turn,
                    messages: messages.clone(),
                    schema: structured.then(|| closed.clone()),
                    schema_name: super::think::schema_name(&node.output_type),
                    tools: if exhausted { Vec::new() } else { specs.clone() },
                    temperature: *temperature,
                    max_tokens: *max_tokens,
                    inputs: Value::Object(unit.params.clone().into_iter().collect()),
                    traceparent: shared
                        .trace
                        .as_ref()
                        .map(|t| t.turn_parent(&node.name, unit.item, turn)),
                };
                let started = std::time::Instant::now();
                let reply = match m.complete(&request).await {
                    Ok(r) => r,
                    Err(e) => return Err(model_failure(&mut cx, model, turn, e)),
                };
                shared.trace_turn(&node.name, unit.item, turn, &request.messages, &reply);
                transcript::store_reply(&cx, model, turn, &reply, started, &mut rows).await?;
                reply
            }
        };
        let mut assistant = Message::text(Role::Assistant, reply.content.clone());
        assistant.tool_calls = reply.tool_calls.clone();
        messages.push(assistant);
        if reply.tool_calls.is_empty() || exhausted {
            if !*structured {
                return Ok(Value::String(reply.content));
            }
            let problem = match extract_json(&reply.content) {
                Ok(v) => match shared.validators.check(&node.output, &v, Mode::Strict) {
                    Ok(()) => return Ok(v),
                    Err(e) => format!("The reply does not match the schema: {e}"),
                },
                Err(e) => format!("The reply is not valid JSON: {e}"),
            };
            if repaired >= repairs {
                let last: String = reply.content.chars().take(500).collect();
                return Err(fatal(
                    &cx,
                    &codes::MODEL_OUTPUT_INVALID,
                    shared.scrubber.scrub(&format!(
                        "the final answer of `{}` does not fit `{}` after {repairs} repairs: {problem}; last reply: {last}",
                        node.name, node.output_type
                    )),
                ));
            }
            repaired += 1;
            // The reply is quoted back by its start and end, however large it was.
            if let Some(last) = messages.last_mut() {
                last.content = super::think::repair_excerpt(&reply.content);
            }
            messages.push(Message::text(
                Role::User,
                format!("{problem}\nReply again with only the corrected JSON."),
            ));
            turn += 1;
            continue;
        }
        // The turn's tool calls, in order, each row committed as its call finishes: a
        // crash while a later call of the turn runs repeats none that finished.
        let mut pending_writes = Vec::new();
        for (j, requested) in reply.tool_calls.iter().enumerate() {
            let made = match ToolCall::new(&cx, &toolbox, requested, turn, j as u32 + 1) {
                Ok(call) => {
                    call.make(&toolbox, &mut rows, &mut used, &mut pending_writes)
                        .await
                }
                Err(told) => Ok(told),
            };
            let outcome = match made {
                Ok(outcome) => outcome,
                Err(e) => {
                    // What the turn wrote so far goes with the try's end, in one commit
                    // with the node's failure, retry or block.
                    cx.writes.append(&mut pending_writes);
                    return Err(e);
                }
            };
            manifest::append(
                cx.manifest,
                outcome.links.clone(),
                &node.name,
                unit.generation,
                unit.item,
            );
            let mut msg = Message::text(Role::Tool, outcome.text);
            msg.tool_call_id = Some(requested.id.clone());
            messages.push(msg);
            if !pending_writes.is_empty() {
                shared
                    .commit(std::mem::take(&mut pending_writes))
                    .await
                    .map_err(|e| TryError::Fatal(e.stored(Some(&node.name))))?;
            }
        }
        turn += 1;
    }
}

/// A model that did not answer: its `model_failed` event goes with the try's end.
fn model_failure(cx: &mut TryContext<'_>, model: &str, turn: u32, e: ModelError) -> TryError {
    let failure = ModelFailure::new(cx.shared, model, &e);
    cx.writes.push(failure.event(cx, turn, model));
    failure.into_try_error(cx)
}
