//! Running one node (or one item of an `each` node) that is not pure: `exec`, `host` and
//! `think`, with timeouts, retries (stored before sleeping), repairs, and the journal of
//! effects. Results are returned to the scheduler, which commits them together with
//! whatever they make ready (one commit per step of a chain).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::attempt::Shared;
use super::exec::{self, ExecError};
use super::progress::Step;
use super::runner::RuntimeError;
use super::secrets::placeholder;
use crate::diagnostic as codes;
use crate::llm::{Message, ModelError, ModelRequest, Role, extract_json};
use crate::plan::{Body, Node, Source};
use crate::store::{CallKey, CallRec, CallState, NodeRec, NodeState, StoredError, Write, ids};

/// One unit of work: a node, or one item of it.
pub(crate) struct Unit {
    pub node: Arc<Node>,
    pub item: u32,
    /// The item index as `PIPEC_ITEM` shows it (none for plain nodes).
    pub is_item: bool,
    pub params: BTreeMap<String, Value>,
    pub generation: u32,
    /// Tries already used (from the node row), for the `retries` policy.
    pub tries: u32,
    /// The journal sequence number of the next try: never reused within a generation,
    /// whatever the retry policy says, so no two calls share a key.
    pub seq: u32,
    /// The journal key of a `started` row the scheduler already committed for try
    /// `tries` (non-idempotent `exec`).
    pub started: Option<CallKey>,
    /// A retry's wait that a crash interrupted: the rest is waited out first.
    pub wait_until_ms: Option<u64>,
}

/// What a unit ended with; the writes are committed by the caller.
pub(crate) enum UnitEnd {
    Value {
        value: Value,
        writes: Vec<Write>,
    },
    Failed {
        error: StoredError,
        writes: Vec<Write>,
    },
    /// An effect whose outcome is unknown: the thread needs a person.
    Unknown {
        error: StoredError,
        writes: Vec<Write>,
    },
}

enum TryError {
    /// Trying again may help (and is safe).
    Transient(String),
    /// It will not get better.
    Fatal(StoredError),
    /// The effect may have happened.
    Unknown(String),
}

fn err(
    rule: &'static crate::diagnostic::Rule,
    node: &str,
    message: impl Into<String>,
) -> StoredError {
    RuntimeError::new(rule, message).stored(Some(node))
}

/// Whether a node's body is an effect that must be journaled before it starts.
pub(crate) fn needs_started_row(node: &Node) -> bool {
    matches!(
        node.body,
        Body::Exec {
            idempotent: false,
            ..
        }
    )
}

pub(crate) fn args_hash(args: &Value) -> String {
    let digest = Sha256::digest(serde_json::to_vec(args).unwrap_or_default());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn idem_key(thread: &str, key: &CallKey) -> String {
    let digest = Sha256::digest(format!(
        "{thread}/{}/{}/{}/{}/{}",
        key.node, key.generation, key.item, key.seq, key.call
    ));
    digest.iter().take(13).map(|b| format!("{b:02x}")).collect()
}

/// The parameters as stored: secrets replaced by placeholders.
pub(crate) fn redacted_params(node: &Node, params: &BTreeMap<String, Value>) -> Value {
    let mut out = serde_json::Map::new();
    for (k, v) in params {
        let secret = node
            .params
            .iter()
            .find(|p| &p.name == k)
            .and_then(|p| secret_name(&p.source));
        out.insert(
            k.clone(),
            match secret {
                Some(name) => placeholder(&name),
                None => v.clone(),
            },
        );
    }
    Value::Object(out)
}

fn secret_name(src: &Source) -> Option<String> {
    match src {
        Source::Secret { var } => Some(var.clone()),
        Source::Join { sides } => sides.iter().find_map(secret_name),
        _ => None,
    }
}

/// The `started` journal row for a try of an effect.
pub(crate) fn started_row(shared: &Shared, unit: &Unit, seq: u32) -> (CallKey, CallRec) {
    let key = CallKey {
        node: unit.node.name.clone(),
        generation: unit.generation,
        item: unit.item,
        seq,
        call: 0,
    };
    let args = redacted_params(&unit.node, &unit.params);
    let (target, idempotent) = match &unit.node.body {
        Body::Exec { argv, idempotent } => (argv.join(" "), *idempotent),
        _ => (String::new(), true),
    };
    let rec = CallRec {
        kind: "exec".into(),
        target,
        args_hash: args_hash(&args),
        args: None,
        idempotent,
        idem_key: idem_key(&shared.thread_id, &key),
        state: CallState::Started,
        result: None,
        error: None,
        attempt: shared.attempt_no,
        started_ms: ids::now_ms(),
        finished_ms: 0,
        decision: None,
    };
    (key, rec)
}

/// Runs a unit with its retries. Retry state is committed before each wait.
pub(crate) async fn run_unit(shared: Arc<Shared>, mut unit: Unit) -> UnitEnd {
    let node = unit.node.clone();
    let retries = node.retries.unwrap_or(0) as u32;
    let mut writes: Vec<Write> = Vec::new();
    if let Some(until) = unit.wait_until_ms.take() {
        let now = ids::now_ms();
        if until > now {
            tokio::time::sleep(Duration::from_millis(until - now)).await;
        }
    }
    loop {
        let seq = unit.seq;
        let _permit = shared.permits.acquire().await;
        if let Some(p) = &shared.progress {
            p.step(Step::Started {
                node: &node.name,
                item: unit.is_item.then_some(unit.item),
            });
        }
        let started = Instant::now();
        let attempt = run_once(&shared, &mut unit, seq, &mut writes);
        let result = match node.timeout_ms {
            Some(ms) => match tokio::time::timeout(Duration::from_millis(ms), attempt).await {
                Ok(r) => r,
                Err(_) => {
                    let msg = format!(
                        "`{}` ran longer than its timeout of {}",
                        node.name,
                        super::progress::human(Duration::from_millis(ms))
                    );
                    if needs_started_row(&node) {
                        Err(TryError::Unknown(msg))
                    } else {
                        Err(TryError::Transient(msg))
                    }
                }
            },
            None => attempt.await,
        };
        drop(_permit);
        // The end of the try, in the journal of effects that have one.
        let journal = |writes: &mut Vec<Write>, state, error| {
            if needs_started_row(&node) {
                writes.push(finish_call(&shared, &unit, seq, state, error));
            }
        };
        match result {
            Ok(value) => {
                if let Some(p) = &shared.progress {
                    p.step(Step::Finished {
                        node: &node.name,
                        took: started.elapsed(),
                    });
                }
                journal(&mut writes, CallState::Ok, None);
                return UnitEnd::Value { value, writes };
            }
            Err(TryError::Unknown(msg)) => {
                journal(&mut writes, CallState::Unknown, Some(msg.clone()));
                let error = err(
                    &codes::UNFINISHED_EFFECT,
                    &node.name,
                    format!("{msg}; whether it took effect is unknown"),
                );
                return UnitEnd::Unknown { error, writes };
            }
            Err(TryError::Fatal(error)) => {
                // An item's failure is shown here; a node's, by the scheduler as it fails
                // the node.
                if unit.is_item
                    && let Some(p) = &shared.progress
                {
                    p.step(Step::Failed {
                        node: &node.name,
                        message: &error.message,
                    });
                }
                journal(
                    &mut writes,
                    CallState::ToolError,
                    Some(error.message.clone()),
                );
                return UnitEnd::Failed { error, writes };
            }
            Err(TryError::Transient(msg)) => {
                journal(&mut writes, CallState::ToolError, Some(msg.clone()));
                if unit.tries >= retries {
                    let rule = match node.body {
                        Body::Exec { .. } => &codes::EXEC_FAILED,
                        Body::Model { .. } => &codes::MODEL_OUTPUT_INVALID,
                        _ => &codes::EXEC_FAILED,
                    };
                    let message = if retries > 0 {
                        format!("{msg} (after {} tries)", unit.tries + 1)
                    } else {
                        msg
                    };
                    let error = err(rule, &node.name, message);
                    if unit.is_item
                        && let Some(p) = &shared.progress
                    {
                        p.step(Step::Failed {
                            node: &node.name,
                            message: &error.message,
                        });
                    }
                    return UnitEnd::Failed { error, writes };
                }
                // The next try and its wait are stored before waiting.
                unit.tries += 1;
                unit.seq += 1;
                let backoff = Duration::from_millis(
                    node.backoff_ms
                        .unwrap_or(500)
                        .saturating_mul(1u64 << (unit.tries - 1).min(6)),
                );
                let due = ids::now_ms() + backoff.as_millis() as u64;
                let mut batch = std::mem::take(&mut writes);
                if !unit.is_item {
                    batch.push(Write::Node(
                        node.name.clone(),
                        NodeRec {
                            generation: unit.generation,
                            fingerprint: node.fingerprint.clone(),
                            state: NodeState::Running,
                            value: None,
                            error: Some(err(&codes::EXEC_FAILED, &node.name, msg.clone())),
                            tries: unit.tries,
                            crash_count: 0,
                            next_retry_ms: Some(due),
                            started_ms: ids::now_ms(),
                            finished_ms: 0,
                            items: None,
                        },
                    ));
                }
                batch.push(Write::Event(json!({ "type": "retry_scheduled", "node": node.name, "item": unit.item, "try": unit.tries, "at_ms": due, "error": msg })));
                if needs_started_row(&node) {
                    let (key, rec) = started_row(&shared, &unit, unit.seq);
                    batch.push(Write::Call(key.clone(), rec));
                    unit.started = Some(key);
                }
                if let Err(e) = shared.commit(batch).await {
                    return UnitEnd::Failed {
                        error: e.stored(Some(&node.name)),
                        writes: Vec::new(),
                    };
                }
                if let Some(p) = &shared.progress {
                    p.step(Step::Retrying {
                        node: &node.name,
                        try_number: unit.tries + 1,
                        after: backoff,
                    });
                }
                tokio::time::sleep(backoff).await;
            }
        }
    }
}

fn finish_call(
    shared: &Shared,
    unit: &Unit,
    seq: u32,
    state: CallState,
    error: Option<String>,
) -> Write {
    let (key, mut rec) = started_row(shared, unit, seq);
    rec.state = state;
    // An `exec`'s result is its node's value: the journal keeps only the state.
    rec.error = error;
    rec.finished_ms = ids::now_ms();
    Write::Call(key, rec)
}

async fn run_once(
    shared: &Shared,
    unit: &mut Unit,
    seq: u32,
    writes: &mut Vec<Write>,
) -> Result<Value, TryError> {
    let node = unit.node.clone();
    match &node.body {
        Body::Exec { argv, .. } => run_exec(shared, unit, argv, seq).await,
        Body::Host { function } => {
            let Some(f) = shared.hosts.get(function) else {
                return Err(TryError::Fatal(err(
                    &codes::HOST_FUNCTION_MISSING,
                    &node.name,
                    format!("no host function `{function}` is registered"),
                )));
            };
            let out = f(Value::Object(unit.params.clone().into_iter().collect()))
                .await
                .map_err(|e| {
                    TryError::Transient(format!("the host function `{function}` failed: {e}"))
                })?;
            shared
                .validators
                .check(&node.output, &out, false)
                .map_err(|e| TryError::Fatal(err(&codes::EXEC_OUTPUT_INVALID, &node.name, format!("the host function `{function}` returned something that does not fit `{}`: {e}", node.output_type))))?;
            Ok(out)
        }
        Body::Model { .. } => run_think(shared, unit, writes).await,
        _ => Err(TryError::Fatal(err(
            &codes::MCP_SERVER_FAILED,
            &node.name,
            "this node kind needs MCP tools, which this version of pipec does not run yet",
        ))),
    }
}

async fn run_exec(
    shared: &Shared,
    unit: &Unit,
    argv: &[String],
    seq: u32,
) -> Result<Value, TryError> {
    let node = &unit.node;
    let key = CallKey {
        node: node.name.clone(),
        generation: unit.generation,
        item: unit.item,
        seq,
        call: 0,
    };
    let env = vec![
        ("PIPEC_THREAD".to_string(), shared.thread_id.clone()),
        ("PIPEC_NODE".to_string(), node.name.clone()),
        (
            "PIPEC_ITEM".to_string(),
            if unit.is_item {
                unit.item.to_string()
            } else {
                String::new()
            },
        ),
        (
            "PIPEC_CALL_KEY".to_string(),
            idem_key(&shared.thread_id, &key),
        ),
    ];
    let stdin = Value::Object(unit.params.clone().into_iter().collect());
    let result = exec::run(exec::ExecRequest {
        argv,
        project_root: &shared.project_root,
        stdin: &stdin,
        env,
        timeout: None,
    })
    .await;
    let idempotent = !needs_started_row(node);
    let scrub = |s: String| shared.scrubber.scrub(&s);
    match result {
        Ok(value) => {
            shared
                .validators
                .check(&node.output, &value, false)
                .map_err(|e| {
                    TryError::Fatal(err(
                        &codes::EXEC_OUTPUT_INVALID,
                        &node.name,
                        scrub(format!(
                            "`{}` printed a value that does not fit `{}`: {e}",
                            argv.join(" "),
                            node.output_type
                        )),
                    ))
                })?;
            Ok(value)
        }
        Err(ExecError::Spawn(m)) => Err(TryError::Transient(scrub(m))),
        Err(e @ ExecError::Output { .. }) => Err(TryError::Fatal(err(
            &codes::EXEC_OUTPUT_INVALID,
            &node.name,
            scrub(e.to_string()),
        ))),
        Err(e) if idempotent => Err(TryError::Transient(scrub(e.to_string()))),
        Err(e @ ExecError::TimedOut { .. }) => Err(TryError::Unknown(scrub(e.to_string()))),
        Err(e) => Err(TryError::Fatal(err(
            &codes::EXEC_FAILED,
            &node.name,
            scrub(e.to_string()),
        ))),
    }
}

/// A `think` node: render, call, validate, and send validation errors back (`repairs`).
async fn run_think(
    shared: &Shared,
    unit: &Unit,
    writes: &mut Vec<Write>,
) -> Result<Value, TryError> {
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
        return Err(TryError::Fatal(err(
            &codes::MODEL_OUTPUT_INVALID,
            &node.name,
            "not a model node",
        )));
    };
    let Some(m) = shared.models.get(model) else {
        return Err(TryError::Fatal(err(
            &codes::CONFIG_MISSING,
            &node.name,
            format!("no model `{model}` is available"),
        )));
    };
    let closed = shared.validators.full_schema(&node.output, true);
    let mut context = unit.params.clone();
    context.insert(
        "output_schema".into(),
        Value::String(serde_json::to_string_pretty(&closed).unwrap_or_default()),
    );
    let mut messages = crate::prompt::render_messages(prompt, &context).map_err(|e| {
        TryError::Fatal(err(
            &codes::MODEL_OUTPUT_INVALID,
            &node.name,
            shared
                .scrubber
                .scrub(&format!("the prompt does not render: {e}")),
        ))
    })?;
    let repairs = repairs.unwrap_or(2) as u32;
    let mut turn = 0u32;
    loop {
        let request = ModelRequest {
            node: node.name.clone(),
            item: unit.item,
            turn,
            messages: messages.clone(),
            schema: structured.then(|| closed.clone()),
            schema_name: sanitize(&node.output_type),
            tools: Vec::new(),
            temperature: *temperature,
            max_tokens: *max_tokens,
        };
        let reply = match m.complete(&request).await {
            Ok(r) => r,
            Err(ModelError::Transient(e)) => {
                return Err(TryError::Transient(format!(
                    "the model `{model}` is not answering: {e}"
                )));
            }
            Err(ModelError::Fatal(e)) => {
                return Err(TryError::Fatal(err(
                    &codes::MODEL_OUTPUT_INVALID,
                    &node.name,
                    format!("the model `{model}` refused the request: {e}"),
                )));
            }
        };
        writes.push(Write::Event(json!({
            "type": "model_turn", "node": node.name, "item": unit.item, "turn": turn, "model": reply.model,
            "tokens_in": reply.usage.input_tokens, "tokens_out": reply.usage.output_tokens,
        })));
        if !structured {
            return Ok(Value::String(reply.content));
        }
        let problem = match extract_json(&reply.content) {
            Ok(v) => match shared.validators.check(&node.output, &v, true) {
                Ok(()) => return Ok(v),
                Err(e) => format!("The reply does not match the schema: {e}"),
            },
            Err(e) => format!("The reply is not valid JSON: {e}"),
        };
        if turn >= repairs {
            let last: String = reply.content.chars().take(500).collect();
            return Err(TryError::Fatal(err(
                &codes::MODEL_OUTPUT_INVALID,
                &node.name,
                shared.scrubber.scrub(&format!("the model's output does not fit `{}` after {} repairs: {problem}; last reply: {last}", node.output_type, repairs)),
            )));
        }
        messages.push(Message::text(Role::Assistant, reply.content));
        messages.push(Message::text(
            Role::User,
            format!("{problem}\nReply again with only the corrected JSON."),
        ));
        turn += 1;
    }
}

fn sanitize(name: &str) -> String {
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
