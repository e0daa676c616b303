//! `call` nodes: one MCP tool call with arguments from the body. A read-only or
//! idempotent tool is called again by `retries` and after a crash; any other is
//! journaled before each try (an `act` node's `call =`), with the call's idempotency key
//! in `_meta` either way. The result becomes the node's value as `resources/results.rs`
//! says, and its links go into the node's manifest.

use std::time::Duration;

use serde_json::{Map, Value};

use super::questions::{Questions, asks_people};
use super::{Executor, TryContext, TryError, TryFuture, fatal};
use crate::error::RuntimeError;
use crate::eval;
use crate::hydrate::heal::IDEMPOTENCY_META;
use crate::journal;
use crate::progress::human_bytes;
use crate::resources::results::{self, ResultError};
use crate::resources::{manifest, servers::Servers};
use crate::validate::Mode;
use pipec_diagnostic::{self as codes, Rule};
use pipec_mcp::{Called, McpError, RequestOptions, Resumption, TaskRef};
use pipec_plan::{Body, Node, Plan, Tool};
use pipec_store::{CallDecision, CallKey, CallKind, CallRec, CallState, Write};

pub(crate) struct Call;

fn tool_of<'a>(plan: &'a Plan, node: &Node) -> Option<&'a Tool> {
    match &node.body {
        Body::Call { tool, .. } => plan.tools.iter().find(|t| &t.name == tool),
        _ => None,
    }
}

/// Whether a tool is safe to call again: read-only or idempotent.
fn repeatable(t: &Tool) -> bool {
    t.read_only || t.idempotent
}

impl Executor for Call {
    fn call_kind(&self) -> CallKind {
        CallKind::Tool
    }

    fn journaled(&self, plan: &Plan, node: &Node) -> bool {
        tool_of(plan, node).is_some_and(|t| !repeatable(t))
    }

    fn free_to_redo(&self, plan: &Plan, node: &Node) -> bool {
        !self.journaled(plan, node)
    }

    fn target(&self, node: &Node) -> String {
        match &node.body {
            Body::Call { tool, .. } => tool.clone(),
            _ => String::new(),
        }
    }

    fn failure_rule(&self) -> &'static Rule {
        &codes::MCP_SERVER_FAILED
    }

    fn run<'a>(&'a self, cx: TryContext<'a>) -> TryFuture<'a> {
        Box::pin(run(cx))
    }
}

/// A tool's arguments: the body's expressions over the parameters, under the names the
/// server takes; an optional parameter left null is left out.
pub(crate) fn arguments(
    tool: &Tool,
    args: &std::collections::BTreeMap<String, pipec_plan::Expr>,
    params: &std::collections::BTreeMap<String, Value>,
) -> Result<Map<String, Value>, eval::EvalError> {
    let mut out = Map::new();
    for (name, e) in args {
        let v = eval::expr(params, e)?;
        let param = tool.params.iter().find(|p| &p.name == name);
        if v.is_null() && param.is_some_and(|p| !p.required) {
            continue;
        }
        let wire = param.map_or(name.as_str(), |p| p.wire_name.as_str());
        out.insert(wire.to_string(), v);
    }
    Ok(out)
}

/// How a tool call the server did not answer with a result ends the try, `message`
/// (scrubbed) about `node`: tried again when nothing was sent (`R0501` after the last
/// try); when the request may have reached the server, tried again only if the tool is
/// `repeatable`, else an unknown effect; otherwise a failure whose code says why, with
/// what to change when the error knows.
pub(crate) fn call_failure(
    e: &McpError,
    repeatable: bool,
    message: String,
    node: &str,
) -> TryError {
    let again = |message| TryError::Transient {
        rule: &codes::MCP_SERVER_FAILED,
        message,
    };
    let failed = |rule, message| {
        let mut error = RuntimeError::new(rule, message);
        if let Some(help) = e.help() {
            error = error.help(help);
        }
        TryError::Fatal(error.stored(Some(node)))
    };
    match e {
        // Nothing was sent: trying again is safe for any tool.
        McpError::Start { .. } | McpError::StartTimeout { .. } => again(message),
        // The request may have reached the server.
        McpError::Closed { .. }
        | McpError::Timeout { .. }
        | McpError::Garbage { .. }
        | McpError::Protocol { .. }
        | McpError::TaskLost { .. } => {
            if repeatable {
                again(message)
            } else {
                TryError::Unknown(message)
            }
        }
        McpError::Http { status, .. } if *status >= 500 => {
            if repeatable {
                again(message)
            } else {
                TryError::Unknown(message)
            }
        }
        // Refused credentials are the server's setup, not the tool's failure, and trying
        // again sends the same ones.
        McpError::Authorization { .. } => failed(&codes::MCP_SERVER_FAILED, message),
        McpError::Http { .. } if e.refused_credentials() => {
            failed(&codes::MCP_SERVER_FAILED, message)
        }
        McpError::TooLarge { .. } => failed(&codes::TOOL_RESULT_UNPARSABLE, message),
        // A tape without the call answers the same the next time.
        McpError::NoAnswer { .. } => failed(&codes::MCP_SERVER_FAILED, message),
        McpError::Server { .. } | McpError::Http { .. } | McpError::InputRequired { .. } => {
            failed(&codes::TOOL_FAILED, message)
        }
    }
}

/// A result larger than its tool allows (`R0107`), with what to change.
fn over_max_result_bytes(cx: &TryContext<'_>, tool: &Tool, message: String) -> TryError {
    TryError::Fatal(
        RuntimeError::new(&codes::TOOL_RESULT_UNPARSABLE, message)
            .help(format!(
                "raise `max_result_bytes` on the tool `{}`, or call it for less",
                tool.name
            ))
            .stored(Some(&cx.unit.node.name)),
    )
}

async fn run(cx: TryContext<'_>) -> Result<Value, TryError> {
    let shared = cx.shared;
    let unit = cx.unit;
    let node = &unit.node;
    let Body::Call {
        tool: tool_name,
        args,
    } = &node.body
    else {
        return Err(fatal(
            &cx,
            &codes::INTERNAL_ERROR,
            format!("`{}` is not a `call` node", node.name),
        ));
    };
    let Some(tool) = tool_of(&shared.plan, node) else {
        return Err(fatal(
            &cx,
            &codes::PLAN_INVALID,
            format!(
                "`{}` calls `{tool_name}`, which the plan does not declare",
                node.name
            ),
        ));
    };
    let sent = arguments(tool, args, &unit.params).map_err(|e| {
        fatal(
            &cx,
            e.rule(),
            format!("the arguments of `{}`: {e}", node.name),
        )
    })?;
    // What the journal and the manifest keep: secrets as placeholders.
    let redacted = match journal::redacted_params(node, &unit.params) {
        Value::Object(o) => o.into_iter().collect(),
        _ => Default::default(),
    };
    let stored = Value::Object(arguments(tool, args, &redacted).unwrap_or_default());
    let mut meta = Map::new();
    meta.insert(IDEMPOTENCY_META.into(), Value::String(cx.idem_key.clone()));
    let limit = tool
        .max_result_bytes
        .unwrap_or(results::DEFAULT_MAX_RESULT_BYTES);
    let message_limit = (limit as usize).saturating_mul(2).saturating_add(64 * 1024);
    let options = RequestOptions {
        timeout: tool.timeout_ms.map(Duration::from_millis),
        limit: Some(message_limit),
        task: tool.task != pipec_plan::ToolTask::Forbidden,
    };
    let scrub = |s: &str| shared.scrubber.scrub(s);
    // A server that may ask a person: the call carries the answers so far.
    let questions = asks_people(&shared.plan, &tool.server).then(|| Questions {
        cx: &cx,
        call: format!("{}:g{}:i{}", node.name, unit.generation, unit.item),
        server: &tool.server,
        tool: &tool.name,
    });
    let key = journal::key(&node.name, unit.generation, unit.item, unit.step);
    // A task an earlier try became (before a crash, or while its questions waited):
    // polled, never called again.
    let earlier = earlier_task(&cx);
    let resumption = match &questions {
        Some(q) => match q.resumption().await {
            Ok(r) => r,
            Err(waiting @ TryError::Waiting { .. }) => {
                // A question still unanswered: nothing is sent, and the try's row says
                // so (not an unfinished effect; a task's row keeps its task).
                if let Some(started) = cx.started {
                    match &earlier {
                        Some(task) => record_task(&cx, &key, started, task).await?,
                        None => shared
                            .commit(vec![Write::Call(
                                key,
                                journal::finished_row(started, CallState::Asked, None),
                            )])
                            .await
                            .map_err(|e| TryError::Fatal(e.stored(Some(&node.name))))?,
                    }
                }
                return Err(waiting);
            }
            Err(e) => return Err(e),
        },
        None => Resumption::default(),
    };
    // Whether the call is a task whose id is journaled: then a failure to follow it
    // leaves its outcome unknown, never calls again.
    let mut tasked = false;
    let mut result = match earlier {
        Some(task) => {
            if let Some(started) = cx.started {
                record_task(&cx, &key, started, &task).await?;
                tasked = true;
            }
            poll(&cx, tool, &task, options, &resumption).await
        }
        None => {
            let send = |meta| {
                shared.resources.servers.call(
                    &tool.server,
                    &tool.wire_name,
                    sent,
                    meta,
                    options,
                    &resumption,
                )
            };
            match &shared.trace {
                Some(t) => {
                    let call = key.display();
                    let of = crate::trace::CallOf {
                        node: &node.name,
                        call: &call,
                        server: &tool.server,
                        tool: &tool.name,
                        arguments: Some(&stored),
                    };
                    t.tool_call(of, meta, scrub, send).await
                }
                None => send(meta).await,
            }
        }
    };
    if let Ok(Called::Task(task)) = &result {
        // The task's id is durable before it is polled: a resume polls the same task.
        if let Some(started) = cx.started {
            record_task(&cx, &key, started, task).await?;
            tasked = true;
        }
        result = poll(&cx, tool, task, options, &resumption).await;
    }
    let result = match result {
        Ok(Called::Result(r)) => r,
        Ok(Called::Task(task)) => {
            return Err(fatal(
                &cx,
                &codes::MCP_SERVER_FAILED,
                format!(
                    "`{}` calling `{}`: the task {} ended in another task",
                    node.name, tool.name, task.id
                ),
            ));
        }
        Ok(Called::Asked(asked)) => {
            // A journaled call's row says it is made again once answered (not an
            // unfinished effect), committed with the questions; a task's row stays as
            // it is, keeping the task, which is polled again with the answers.
            let mut writes = Vec::new();
            if let (Some(started), false) = (cx.started, tasked) {
                writes.push(Write::Call(
                    key.clone(),
                    journal::finished_row(started, CallState::Asked, None),
                ));
            }
            return Err(match &questions {
                Some(q) => q.ask(asked, &mut writes).await,
                None => fatal(
                    &cx,
                    &codes::INTERNAL_ERROR,
                    format!(
                        "`{}`: the server `{}` asked a person",
                        node.name, tool.server
                    ),
                ),
            });
        }
        Err(McpError::TooLarge {
            server,
            limit: cut,
            size,
        }) => {
            let sent = size.map_or_else(
                || format!("a message larger than {}", human_bytes(cut as u64)),
                |size| format!("a message of {}", human_bytes(size)),
            );
            // The session's own limit is lower than the tool's: raising the tool's
            // would not help.
            if cut < message_limit {
                return Err(fatal(
                    &cx,
                    &codes::TOOL_RESULT_UNPARSABLE,
                    format!(
                        "`{}` calling `{}`: the server `{server}` sent {sent}, over the {} pipec takes in one message from a server",
                        node.name,
                        tool.name,
                        human_bytes(cut as u64)
                    ),
                ));
            }
            return Err(over_max_result_bytes(
                &cx,
                tool,
                format!(
                    "`{}` calling `{}`: the server `{server}` sent {sent}, more than its `max_result_bytes` of {} allows; the rest was read past",
                    node.name,
                    tool.name,
                    human_bytes(limit)
                ),
            ));
        }
        Err(e) => {
            let message = scrub(&format!("`{}` calling `{}`: {e}", node.name, tool.name));
            if tasked && !e.answered_by_server() {
                return Err(TryError::Unknown(message));
            }
            return Err(call_failure(&e, repeatable(tool), message, &node.name));
        }
    };
    let size = results::size_of(&result);
    if size > limit {
        let (size_text, limit_text) = sizes_apart(size, limit);
        return Err(over_max_result_bytes(
            &cx,
            tool,
            format!(
                "`{}` returned {}, over its `max_result_bytes` of {}",
                tool.name, size_text, limit_text
            ),
        ));
    }
    let value = results::value_of(&shared.plan, tool, &result, &shared.validators).map_err(
        |e| match e {
            ResultError::Tool(text) => fatal(
                &cx,
                &codes::TOOL_FAILED,
                scrub(&format!("`{}` failed: {text}", tool.name)),
            ),
            ResultError::Unparsable(why) => fatal(
                &cx,
                &codes::TOOL_RESULT_UNPARSABLE,
                scrub(&format!(
                    "the result of `{}` does not fit `{}`: {why}",
                    tool.name, node.output_type
                )),
            ),
        },
    )?;
    shared
        .validators
        .check(&node.output, &value, Mode::Open)
        .map_err(|e| {
            fatal(
                &cx,
                &codes::TOOL_RESULT_UNPARSABLE,
                format!(
                    "the result of `{}` does not fit `{}`: {e}",
                    tool.name, node.output_type
                ),
            )
        })?;
    let key = journal::key(&node.name, unit.generation, unit.item, unit.step).display();
    let refs = manifest::lift(&shared.plan, tool, &result, &stored, &key).map_err(|m| {
        fatal(
            &cx,
            &codes::MALFORMED_LINK,
            scrub(&format!("`{}` returned {m}", tool.name)),
        )
    })?;
    // A link no node of the plan can read is not kept (all were checked: a malformed
    // link fails the call either way); what the result carried in place (an embedded
    // resource, an image) is, as the server may not give it again.
    let read = shared.links_read.get(&node.name);
    let kept: Vec<_> = refs
        .into_iter()
        .filter(|r| {
            r.embedded.is_some()
                || r.kind
                    .as_ref()
                    .is_some_and(|k| read.is_some_and(|kinds| kinds.contains(k)))
        })
        .collect();
    manifest::append(cx.manifest, kept, &node.name, unit.generation, unit.item);
    // What the type does not declare no node can read: it is not kept.
    let mut value = value;
    shared.validators.keep_declared(&node.output, &mut value);
    Ok(value)
}

/// The task an earlier try of this call became, to be polled again: the newest row
/// keeps one, and says the task was being followed when that try ended (a crash), its
/// outcome unknown (a timeout, a server that could not be reached), or that a person
/// asked to try again.
fn earlier_task(cx: &TryContext<'_>) -> Option<TaskRef> {
    let rows = cx.unit.calls.lock().unwrap_or_else(|e| e.into_inner());
    let (_, newest) = rows
        .iter()
        .filter(|((step, _), _)| *step < cx.unit.step)
        .max_by_key(|((step, call), _)| (*step, *call))?;
    let follow = match newest.state {
        CallState::Tasked | CallState::Unknown => true,
        CallState::Resolved => newest.decision == Some(CallDecision::RetryRequested),
        _ => false,
    };
    if !follow {
        return None;
    }
    serde_json::from_value(newest.task.clone()?).ok()
}

/// Journals that the try's call became a server's task (its row, and the unit's copy
/// from which the try's last row is written).
async fn record_task(
    cx: &TryContext<'_>,
    key: &CallKey,
    started: &CallRec,
    task: &TaskRef,
) -> Result<(), TryError> {
    let row = CallRec {
        state: CallState::Tasked,
        task: serde_json::to_value(task).ok(),
        ..started.clone()
    };
    cx.shared
        .commit(vec![Write::Call(key.clone(), row.clone())])
        .await
        .map_err(|e| TryError::Fatal(e.stored(Some(&cx.unit.node.name))))?;
    cx.unit
        .calls
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert((key.seq, key.call), row);
    Ok(())
}

/// Polls a task to its end. A server that no longer knows the task (it restarted, or
/// the task outlived its time to live) leaves the outcome of an effect unknown; a
/// repeatable call is made again.
async fn poll(
    cx: &TryContext<'_>,
    tool: &Tool,
    task: &TaskRef,
    options: RequestOptions,
    resumption: &Resumption,
) -> Result<Called, McpError> {
    cx.shared
        .resources
        .servers
        .await_task(&tool.server, task, options, resumption)
        .await
}

/// Two sizes for people, in exact bytes when their rounded forms would read the same
/// (`1 MB, over its 1 MB` says nothing).
fn sizes_apart(size: u64, limit: u64) -> (String, String) {
    let (a, b) = (human_bytes(size), human_bytes(limit));
    if a == b {
        (format!("{size} bytes"), format!("{limit} bytes"))
    } else {
        (a, b)
    }
}

#[cfg(test)]
mod tests {
    use super::sizes_apart;

    #[test]
    fn sizes_that_round_alike_are_given_in_bytes() {
        assert_eq!(
            sizes_apart(1_500_000, 1_000_000),
            ("1.5 MB".to_string(), "1 MB".to_string())
        );
        assert_eq!(
            sizes_apart(1_000_400, 1_000_000),
            ("1000400 bytes".to_string(), "1000000 bytes".to_string())
        );
    }
}
