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

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::think::ModelFailure;
use super::{Executor, TryContext, TryError, TryFuture, fatal};
use crate::attempt::event_write;
use crate::error::RuntimeError;
use crate::journal;
use crate::llm::{
    Message, ModelError, ModelReply, ModelRequest, Role, ToolCall, ToolSpec, extract_json,
};
use crate::resources::heal::IDEMPOTENCY_META;
use crate::resources::hydrate::{Caps, Reader};
use crate::resources::results::{self, ResultError};
use crate::resources::{manifest, servers::Servers};
use crate::validate::Mode;
use pipec_diagnostic::{self as codes, Rule};
use pipec_mcp::{McpError, RequestOptions};
use pipec_plan::{Body, Node, Plan, Tool, ToolKind};
use pipec_store::{
    CallKey, CallRec, CallState, Event, GateRec, GateState, ResourceRef, Write, ids,
};

/// A tool loop: `agent` (read-only tools) or `act` (tools with effects).
pub(crate) struct Loop;

/// The default number of model turns that may call tools.
const DEFAULT_MAX_STEPS: u64 = 10;

/// The most of a tool result's text kept in its row (what the model saw, to rebuild the
/// conversation).
const KEPT_TOOL_TEXT: usize = 256 * 1024;

impl Executor for Loop {
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

/// The answer an approval gate takes.
fn approval_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "approved": { "type": "boolean" },
            "note": { "type": ["string", "null"] }
        },
        "required": ["approved"]
    })
}

/// The key of a loop's row: turn `turn`, call `call` (0 is the model's reply).
fn key(cx: &TryContext<'_>, turn: u32, call: u32) -> CallKey {
    CallKey {
        node: cx.unit.node.name.clone(),
        generation: cx.unit.generation,
        item: cx.unit.item,
        seq: turn,
        call,
    }
}

/// The model's reply as its row keeps it.
fn reply_value(reply: &ModelReply) -> Value {
    serde_json::to_value(reply).unwrap_or(Value::Null)
}

fn row(
    cx: &TryContext<'_>,
    kind: &str,
    target: &str,
    args: Option<Value>,
    idempotent: bool,
    idem_key: String,
    state: CallState,
    result: Option<Value>,
    error: Option<String>,
) -> CallRec {
    let hash = args.as_ref().map(journal::args_hash).unwrap_or_default();
    CallRec {
        kind: kind.into(),
        target: target.into(),
        args,
        args_hash: hash,
        idempotent,
        idem_key,
        state,
        result,
        error,
        attempt: cx.shared.attempt_no,
        started_ms: ids::now_ms(),
        finished_ms: ids::now_ms(),
        decision: None,
        watched_by: None,
    }
}

/// The rows of the conversation, kept in the unit too, so that a retry of the node goes
/// on from what an earlier try committed.
struct Rows<'a> {
    local: BTreeMap<(u32, u32), CallRec>,
    shared: &'a std::sync::Mutex<BTreeMap<(u32, u32), CallRec>>,
}

impl Rows<'_> {
    fn get(&self, k: &(u32, u32)) -> Option<&CallRec> {
        self.local.get(k)
    }

    fn insert(&mut self, k: (u32, u32), rec: CallRec) {
        self.shared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(k, rec.clone());
        self.local.insert(k, rec);
    }
}

/// How one tool call of a turn ended, as the conversation goes on from it.
struct Outcome {
    /// What the model is shown.
    text: String,
    /// The links its result carried.
    links: Vec<ResourceRef>,
}

async fn run(cx: TryContext<'_>) -> Result<Value, TryError> {
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
    let specs: Vec<ToolSpec> = declared
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
    let mut rows = Rows {
        local: unit
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(k, _)| k.1 < crate::resources::heal::HEAL_CALL_BASE)
            .map(|(k, r)| (*k, r.clone()))
            .collect(),
        shared: &unit.calls,
    };
    let mut used: BTreeMap<String, u64> = BTreeMap::new();
    let mut repaired = 0u32;
    let mut turn = 0u32;
    loop {
        let exhausted = turn >= max_steps;
        let reply = match rows.get(&(turn, 0)).and_then(|r| r.result.clone()) {
            Some(stored) => serde_json::from_value::<ModelReply>(stored).map_err(|e| {
                fatal(
                    &cx,
                    &codes::INTERNAL_ERROR,
                    format!(
                        "the stored turn {turn} of `{}` cannot be read: {e}",
                        node.name
                    ),
                )
            })?,
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
                };
                let reply = match m.complete(&request).await {
                    Ok(r) => r,
                    Err(e) => return Err(model_failure(&cx, model, turn, e).await),
                };
                // The turn is stored before anything it asks for runs, so a reply nested
                // deeper than the store reads back is refused first.
                if pipec_base::nesting::value_too_deep(&reply_value(&reply)) {
                    return Err(fatal(
                        &cx,
                        &codes::MODEL_OUTPUT_INVALID,
                        format!(
                            "the reply of the model `{model}` nests more than {} levels of arrays and objects",
                            pipec_base::nesting::MAX_VALUE_NESTING
                        ),
                    ));
                }
                let rec = row(
                    &cx,
                    "model",
                    model,
                    None,
                    true,
                    unit.idem_key.clone(),
                    CallState::Ok,
                    Some(reply_value(&reply)),
                    None,
                );
                let writes = vec![
                    Write::Call(key(&cx, turn, 0), rec.clone()),
                    event_write(Event::ModelTurn {
                        node: node.name.clone(),
                        item: unit.item,
                        turn,
                        model: reply.model.clone(),
                        tokens_in: reply.usage.input_tokens,
                        tokens_out: reply.usage.output_tokens,
                    }),
                ];
                shared
                    .commit(writes)
                    .await
                    .map_err(|e| TryError::Fatal(e.stored(Some(&node.name))))?;
                rows.insert((turn, 0), rec);
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
        for (j, call) in reply.tool_calls.iter().enumerate() {
            let n = j as u32 + 1;
            let outcome = tool_call(
                &cx,
                &declared,
                call,
                turn,
                n,
                &mut rows,
                &mut used,
                limits,
                approve,
                *tool_timeout_ms,
                &mut pending_writes,
            )
            .await?;
            manifest::append(
                cx.manifest,
                outcome.links.clone(),
                &node.name,
                unit.generation,
                unit.item,
            );
            let mut msg = Message::text(Role::Tool, outcome.text);
            msg.tool_call_id = Some(call.id.clone());
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

async fn model_failure(cx: &TryContext<'_>, model: &str, turn: u32, e: ModelError) -> TryError {
    let failure = ModelFailure::new(cx.shared, model, &e);
    let _ = cx.shared.commit(vec![failure.event(cx, turn, model)]).await;
    failure.into_try_error(cx)
}

/// The arguments a model gave, projected onto the tool's declared parameters (under the
/// server's names); an argument it does not declare is an error the model is shown.
fn project(tool: &Tool, given: &Value) -> Result<Map<String, Value>, String> {
    let Some(given) = given.as_object() else {
        return Err("the arguments are not a JSON object".into());
    };
    let mut out = Map::new();
    for (k, v) in given {
        let Some(p) = tool.params.iter().find(|p| &p.name == k) else {
            let names: Vec<&str> = tool.params.iter().map(|p| p.name.as_str()).collect();
            return Err(format!(
                "`{}` has no parameter `{k}` (it takes: {})",
                tool.name,
                names.join(", ")
            ));
        };
        if v.is_null() && !p.required {
            continue;
        }
        out.insert(p.wire_name.clone(), v.clone());
    }
    for p in &tool.params {
        if p.required && !out.contains_key(&p.wire_name) {
            match &p.default {
                Some(d) => {
                    out.insert(p.wire_name.clone(), d.clone());
                }
                None => return Err(format!("`{}` needs `{}`", tool.name, p.name)),
            }
        }
    }
    Ok(out)
}

/// One tool call of a turn: from its row when it already ran (or was decided), else made
/// now (journaled first when it has effects).
#[allow(clippy::too_many_arguments)]
async fn tool_call(
    cx: &TryContext<'_>,
    declared: &[&Tool],
    call: &ToolCall,
    turn: u32,
    n: u32,
    rows: &mut Rows<'_>,
    used: &mut BTreeMap<String, u64>,
    limits: &BTreeMap<String, u64>,
    approve: &[String],
    tool_timeout_ms: Option<u64>,
    writes: &mut Vec<Write>,
) -> Result<Outcome, TryError> {
    let shared = cx.shared;
    let node = &cx.unit.node;
    let call_key = key(cx, turn, n);
    let told = |text: String| Outcome {
        text,
        links: Vec::new(),
    };
    let Some(tool) = declared.iter().find(|t| t.name == call.name).copied() else {
        let names: Vec<&str> = declared.iter().map(|t| t.name.as_str()).collect();
        return Ok(told(format!(
            "There is no tool `{}`. The tools are: {}.",
            call.name,
            names.join(", ")
        )));
    };
    let stored_args = {
        let mut a = call.arguments.clone();
        shared.scrubber.scrub_value(&mut a);
        a
    };
    // A call that already ran, or that a person decided.
    if let Some(done) = rows.get(&(turn, n)).cloned() {
        *used.entry(tool.name.clone()).or_default() += 1;
        if done.args_hash != journal::args_hash(&stored_args) {
            return Err(TryError::Fatal(
                crate::error::RuntimeError::new(
                    &codes::JOURNAL_DIVERGENCE,
                    format!(
                        "the call {} of `{}` is recorded with other arguments than the model's turn gives",
                        call_key.display(),
                        tool.name
                    ),
                )
                .stored(Some(&node.name)),
            ));
        }
        match done.state {
            // A reader's row keeps where it read, not what: it is read again.
            CallState::Ok if done.kind == "read" => {}
            CallState::Ok | CallState::ToolError | CallState::Refused => {
                return Ok(from_row(&done));
            }
            CallState::Resolved if done.decision.as_deref() != Some("retry requested") => {
                let performed = done
                    .result
                    .as_ref()
                    .and_then(|r| r.get("performed"))
                    .cloned()
                    .unwrap_or(Value::Null);
                return Ok(told(format!(
                    "The call was made, with this result: {}",
                    serde_json::to_string(&performed).unwrap_or_default()
                )));
            }
            // A retry someone asked for is the call made again, below.
            CallState::Resolved => {}
            // Recovery blocks a thread whose effect is unfinished before it runs.
            CallState::Started | CallState::Unknown => {
                return Err(TryError::Unknown(format!(
                    "the call {} of `{}` was in flight when its process stopped",
                    call_key.display(),
                    tool.name
                )));
            }
        }
    } else {
        *used.entry(tool.name.clone()).or_default() += 1;
    }
    let idem_key =
        journal::idempotency_key(&Default::default(), &shared.thread_id, &call_key, true);
    let repeatable = tool.read_only || tool.idempotent || tool.kind == ToolKind::Reader;
    // `limits`: beyond its cap a tool is not called; the model is told.
    if let Some(cap) = limits.get(&tool.name)
        && used.get(&tool.name).copied().unwrap_or(0) > *cap
    {
        let text = format!(
            "The call was refused: `{}` may be called at most {cap} time(s) in this step, and that is used up.",
            tool.name
        );
        return Ok(refused(
            cx,
            tool,
            stored_args,
            repeatable,
            idem_key,
            text,
            &call_key,
            rows,
            writes,
        ));
    }
    let args = match project(tool, &call.arguments) {
        Ok(a) => a,
        Err(problem) => {
            let text = format!("The call was not made: {problem}.");
            return Ok(refused(
                cx,
                tool,
                stored_args,
                repeatable,
                idem_key,
                text,
                &call_key,
                rows,
                writes,
            ));
        }
    };
    // `approve`: the call waits at its own gate, which shows exactly these arguments.
    if approve.contains(&tool.name) {
        let gate = call_key.display();
        match shared_gate(cx, &gate).await {
            Some(g) if g.state == GateState::Answered => {
                let answer = g.answer.unwrap_or(Value::Null);
                if answer.get("approved") != Some(&Value::Bool(true)) {
                    let note = answer
                        .get("note")
                        .and_then(Value::as_str)
                        .map(|n| format!(": {n}"))
                        .unwrap_or_default();
                    let text = format!("A person did not approve this call{note}.");
                    return Ok(refused(
                        cx,
                        tool,
                        stored_args,
                        repeatable,
                        idem_key,
                        text,
                        &call_key,
                        rows,
                        writes,
                    ));
                }
            }
            Some(g) => {
                return Err(TryError::Waiting {
                    gate,
                    rec: Box::new(g),
                });
            }
            None => {
                // Everything before this call is committed first: the gate shows the
                // state of the conversation as it is.
                shared
                    .commit(std::mem::take(writes))
                    .await
                    .map_err(|e| TryError::Fatal(e.stored(Some(&node.name))))?;
                let message = format!(
                    "`{}` wants to call `{}` with these arguments:\n{}\nApprove with {{\"approved\": true}}, or refuse with {{\"approved\": false, \"note\": \"why\"}}.",
                    node.name,
                    tool.name,
                    serde_json::to_string_pretty(&stored_args).unwrap_or_default()
                );
                let rec = GateRec {
                    node: node.name.clone(),
                    state: GateState::Pending,
                    message: message.clone(),
                    schema: approval_schema(),
                    pending_ms: ids::now_ms(),
                    deadline_ms: None,
                    answer: None,
                    answered_ms: 0,
                    answered_by: None,
                };
                shared
                    .commit(vec![
                        Write::Gate(gate.clone(), rec.clone()),
                        event_write(Event::GatePending {
                            gate: gate.clone(),
                            message,
                            deadline_ms: None,
                        }),
                    ])
                    .await
                    .map_err(|e| TryError::Fatal(e.stored(Some(&node.name))))?;
                return Err(TryError::Waiting {
                    gate,
                    rec: Box::new(rec),
                });
            }
        }
    }
    if tool.kind == ToolKind::Reader {
        return read_tool(
            cx,
            tool,
            &args,
            &stored_args,
            call_key,
            idem_key,
            rows,
            writes,
        )
        .await;
    }
    // An effect is journaled before it is made.
    if !repeatable {
        let rec = row(
            cx,
            "tool",
            &tool.name,
            Some(stored_args.clone()),
            false,
            idem_key.clone(),
            CallState::Started,
            None,
            None,
        );
        writes.push(event_write(Event::CallStarted {
            node: node.name.clone(),
            call: call_key.display(),
            args_hash: rec.args_hash.clone(),
        }));
        writes.push(Write::Call(call_key.clone(), rec));
        shared
            .commit(std::mem::take(writes))
            .await
            .map_err(|e| TryError::Fatal(e.stored(Some(&node.name))))?;
    }
    let mut meta = Map::new();
    meta.insert(IDEMPOTENCY_META.into(), Value::String(idem_key.clone()));
    let limit = tool
        .max_result_bytes
        .unwrap_or(results::DEFAULT_MAX_RESULT_BYTES);
    let options = RequestOptions {
        timeout: tool_timeout_ms
            .or(tool.timeout_ms)
            .map(Duration::from_millis),
        limit: Some((limit as usize).saturating_mul(2).saturating_add(64 * 1024)),
    };
    let result = shared
        .resources
        .servers
        .call_tool(&tool.server, &tool.wire_name, args, meta, options)
        .await;
    let finish = |state, text: String, links: &[ResourceRef], summary: Option<Value>, error| {
        let mut kept = json!({ "for_model": pipec_base::source::shorten(&text, KEPT_TOOL_TEXT) });
        if let Some(s) = summary {
            kept["result"] = s;
        }
        if !links.is_empty() {
            kept["links"] = serde_json::to_value(links).unwrap_or(Value::Null);
        }
        row(
            cx,
            "tool",
            &tool.name,
            Some(stored_args.clone()),
            repeatable,
            idem_key.clone(),
            state,
            Some(kept),
            error,
        )
    };
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            let message = shared
                .scrubber
                .scrub(&format!("`{}` calling `{}`: {e}", node.name, tool.name));
            let (rule, unknown) = super::call::call_failure(&e, repeatable, &|s| s.to_string());
            if unknown {
                let mut rec = finish(
                    CallState::Unknown,
                    String::new(),
                    &[],
                    None,
                    Some(message.clone()),
                );
                rec.result = None;
                writes.push(Write::Call(call_key.clone(), rec));
                let _ = shared.commit(std::mem::take(writes)).await;
                return Err(TryError::Unknown(message));
            }
            // Nothing happened, or it may happen again safely (the node tries again); or
            // the server refused pipec's credentials, which the model cannot mend (the
            // node fails, as a `call` node would).
            if rule.is_none() || e.refused_credentials() {
                if !repeatable {
                    let rec = finish(
                        CallState::ToolError,
                        String::new(),
                        &[],
                        None,
                        Some(message.clone()),
                    );
                    writes.push(Write::Call(call_key.clone(), rec));
                    let _ = shared.commit(std::mem::take(writes)).await;
                }
                if rule.is_none() {
                    return Err(TryError::Transient {
                        rule: &codes::MCP_SERVER_FAILED,
                        message,
                    });
                }
                let mut error = RuntimeError::new(&codes::MCP_SERVER_FAILED, message);
                if let Some(help) = e.help() {
                    error = error.help(help);
                }
                return Err(TryError::Fatal(error.stored(Some(&node.name))));
            }
            // The server refused the call: the model is told, and may do otherwise. A
            // result read past is told like one over the limit once read: ask for less.
            let text = match &e {
                McpError::TooLarge { .. } => {
                    format!("The result was over the limit of {limit} bytes; ask for less.")
                }
                _ => format!("The tool failed: {e}"),
            };
            let rec = finish(CallState::ToolError, text.clone(), &[], None, Some(message));
            writes.push(Write::Call(call_key.clone(), rec.clone()));
            rows.insert((turn, n), rec);
            return Ok(told(shared.scrubber.scrub(&text)));
        }
    };
    let refs = match manifest::lift(
        &shared.plan,
        tool,
        &result,
        &stored_args_object(&stored_args, tool),
        &call_key.display(),
    ) {
        Ok(r) => r,
        Err(m) => {
            let message = shared
                .scrubber
                .scrub(&format!("`{}` returned {m}", tool.name));
            let rec = finish(
                CallState::ToolError,
                String::new(),
                &[],
                None,
                Some(message.clone()),
            );
            writes.push(Write::Call(call_key.clone(), rec));
            let _ = shared.commit(std::mem::take(writes)).await;
            return Err(fatal(cx, &codes::MALFORMED_LINK, message));
        }
    };
    let for_model: Vec<Value> = refs.iter().map(ResourceRef::for_model).collect();
    let summary = results::summary(&result, &for_model);
    let size = results::size_of(&result);
    let (state, text) = if size > limit {
        (
            CallState::ToolError,
            format!("The result was {size} bytes, over the limit of {limit}; ask for less."),
        )
    } else {
        match results::value_of(&shared.plan, tool, &result, &shared.validators) {
            Ok(_) | Err(ResultError::Unparsable(_)) => {
                (CallState::Ok, results::for_model(&result, &for_model))
            }
            Err(ResultError::Tool(t)) => (CallState::ToolError, format!("The tool failed: {t}")),
        }
    };
    let text = shared.scrubber.scrub(&text);
    let rec = finish(state, text.clone(), &refs, Some(summary), None);
    writes.push(Write::Call(call_key.clone(), rec.clone()));
    if !repeatable {
        // The effect's end is durable before anything goes on from it.
        shared
            .commit(std::mem::take(writes))
            .await
            .map_err(|e| TryError::Fatal(e.stored(Some(&node.name))))?;
    }
    rows.insert((turn, n), rec);
    Ok(Outcome { text, links: refs })
}

/// A call that is not made (over its limit, with arguments the tool does not take, or
/// refused at its approval gate): its row says why, and so is the model told.
#[allow(clippy::too_many_arguments)]
fn refused(
    cx: &TryContext<'_>,
    tool: &Tool,
    stored_args: Value,
    repeatable: bool,
    idem_key: String,
    text: String,
    call_key: &CallKey,
    rows: &mut Rows<'_>,
    writes: &mut Vec<Write>,
) -> Outcome {
    let rec = row(
        cx,
        "tool",
        &tool.name,
        Some(stored_args),
        repeatable,
        idem_key,
        CallState::Refused,
        Some(json!({ "for_model": text })),
        None,
    );
    writes.push(Write::Call(call_key.clone(), rec.clone()));
    rows.insert((call_key.seq, call_key.call), rec);
    Outcome {
        text,
        links: Vec::new(),
    }
}

/// The stored arguments of a call under the server's names (what a heal replays).
fn stored_args_object(stored: &Value, tool: &Tool) -> Value {
    match project(tool, stored) {
        Ok(m) => Value::Object(m),
        Err(_) => stored.clone(),
    }
}

/// What a finished call's row says the model was shown, and its links.
fn from_row(rec: &CallRec) -> Outcome {
    let text = rec
        .result
        .as_ref()
        .and_then(|r| r.get("for_model"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let links = rec
        .result
        .as_ref()
        .and_then(|r| r.get("links"))
        .and_then(|l| serde_json::from_value(l.clone()).ok())
        .unwrap_or_default();
    Outcome { text, links }
}

/// The gate row of an approval, as the store has it now (answers come from other
/// processes).
async fn shared_gate(cx: &TryContext<'_>, gate: &str) -> Option<GateRec> {
    match cx.shared.store.load(&cx.shared.thread_id).await {
        Ok(state) => state.gates.get(gate).cloned(),
        Err(_) => None,
    }
}

/// A reader called by the model: its template expanded from the arguments, read through
/// the attempt's cache within its `max_bytes`, parsed into its type. The row keeps the
/// URI and the size, not the content; a rebuilt conversation reads it again.
#[allow(clippy::too_many_arguments)]
async fn read_tool(
    cx: &TryContext<'_>,
    tool: &Tool,
    args: &Map<String, Value>,
    stored_args: &Value,
    call_key: CallKey,
    idem_key: String,
    rows: &mut Rows<'_>,
    writes: &mut Vec<Write>,
) -> Result<Outcome, TryError> {
    let shared = cx.shared;
    let template = tool.uri.clone().unwrap_or_default();
    let lookup = |name: &str| {
        let wire = tool
            .params
            .iter()
            .find(|p| p.name == name)
            .map_or(name, |p| p.wire_name.as_str());
        args.get(wire).map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    };
    let uri = match pipec_base::uri::parse(&template).map(|t| t.expand(&lookup)) {
        Ok(Ok(u)) => u,
        Ok(Err(e)) => {
            return Ok(Outcome {
                text: format!("The read was not made: {e}."),
                links: Vec::new(),
            });
        }
        Err(e) => {
            return Err(fatal(
                cx,
                &codes::PLAN_INVALID,
                format!(
                    "the reader `{}` has a broken template: {}",
                    tool.name, e.message
                ),
            ));
        }
    };
    let caps = Caps {
        max_bytes: tool.max_bytes,
        max_total: None,
        mime: tool.mime.clone(),
    };
    let r = ResourceRef {
        uri: uri.clone(),
        server: tool.server.clone(),
        kind: None,
        captures: Default::default(),
        name: tool.name.clone(),
        mime: tool.mime.clone(),
        size: None,
        producing_call: None,
        origin: None,
        produced_ms: ids::now_ms(),
        max_bytes: None,
        embedded: None,
    };
    let mut events = Vec::new();
    let mut reader = Reader {
        shared,
        node: &cx.unit.node,
        generation: cx.unit.generation,
        item: cx.unit.item,
        step: cx.unit.step,
        writes: &mut events,
    };
    let read = reader
        .read_value(&tool.name, &r, &caps, &tool.output_schema)
        .await;
    writes.extend(events);
    let (state, text, bytes) = match read {
        Ok((value, bytes)) => (
            CallState::Ok,
            serde_json::to_string(&value).unwrap_or_default(),
            bytes,
        ),
        // A transport failure is the node's, and tried again.
        Err(e @ TryError::Transient { .. }) => return Err(e),
        // Anything else the model is told, so it can ask differently (a smaller range).
        Err(TryError::Fatal(e)) => (
            CallState::ToolError,
            format!("The read failed: {}", e.message),
            0,
        ),
        Err(e) => return Err(e),
    };
    let rec = row(
        cx,
        "read",
        &tool.name,
        Some(stored_args.clone()),
        true,
        idem_key,
        state,
        Some(
            json!({ "uri": uri, "bytes": bytes, "for_model": if state == CallState::Ok { Value::Null } else { Value::String(text.clone()) } }),
        ),
        None,
    );
    writes.push(Write::Call(call_key.clone(), rec.clone()));
    rows.insert((call_key.seq, call_key.call), rec);
    Ok(Outcome {
        text,
        links: Vec::new(),
    })
}
