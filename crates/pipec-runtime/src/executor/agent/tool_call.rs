//! One tool call of a loop's turn, as the model asked for it: from its row when it
//! already ran (or a person decided it), else checked against the node's `limits`, the
//! tool's parameters and its `approve` gate, then made — journaled first when it has
//! effects, so a crash in flight blocks the thread instead of repeating the effect.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::super::questions::{Questions, asks_people};
use super::super::{TryContext, TryError, call::call_failure, fatal};
use super::transcript::{self, Outcome, Row, Rows};
use crate::hydrate::heal::IDEMPOTENCY_META;
use crate::journal;
use crate::llm;
use crate::resources::results::{self, ResultError};
use crate::resources::{manifest, servers::Servers};
use pipec_diagnostic as codes;
use pipec_mcp::{Called, McpError, RequestOptions, Resumption};
use pipec_plan::{Tool, ToolKind};
use pipec_store::{CallKey, CallKind, CallRec, CallState, Event, ResourceRef, Write};

/// The tools of a loop and the node's rules for calling them.
pub(super) struct Tools<'a> {
    /// The node's tools, as the plan declares them.
    pub declared: Vec<&'a Tool>,
    /// `limits`: how many times a tool may be called in one step.
    pub limits: &'a BTreeMap<String, u64>,
    /// `approve`: the tools whose calls wait at a gate of their own.
    pub approve: &'a [String],
    /// `tool_timeout_ms`: the time a call may take, over the tool's own.
    pub timeout_ms: Option<u64>,
}

/// One tool call the model asked for.
pub(super) struct ToolCall<'c, 'a> {
    pub cx: &'c TryContext<'a>,
    pub tool: &'c Tool,
    pub requested: &'c llm::ToolCall,
    /// Its row: turn and call number.
    pub key: CallKey,
    /// The arguments as stored, secrets as placeholders.
    pub stored_args: Value,
    /// The key handed to the server.
    pub idem_key: String,
    /// Whether making it again is safe (read-only, idempotent, or a reader): such a call
    /// is not journaled before it is made.
    pub repeatable: bool,
}

impl<'c, 'a> ToolCall<'c, 'a> {
    /// Call `n` of turn `turn`; a tool the node does not have is what the model is told.
    pub(super) fn new(
        cx: &'c TryContext<'a>,
        tools: &Tools<'c>,
        requested: &'c llm::ToolCall,
        turn: u32,
        n: u32,
    ) -> Result<ToolCall<'c, 'a>, Outcome> {
        let Some(tool) = tools
            .declared
            .iter()
            .find(|t| t.name == requested.name)
            .copied()
        else {
            let names: Vec<&str> = tools.declared.iter().map(|t| t.name.as_str()).collect();
            return Err(Outcome::told(format!(
                "There is no tool `{}`. The tools are: {}.",
                requested.name,
                names.join(", ")
            )));
        };
        let mut stored_args = requested.arguments.clone();
        cx.shared.scrubber.scrub_value(&mut stored_args);
        let key = transcript::key(cx, turn, n);
        let idem_key =
            journal::idempotency_key(&Default::default(), &cx.shared.thread_id, &key, true);
        Ok(ToolCall {
            cx,
            tool,
            requested,
            key,
            stored_args,
            idem_key,
            repeatable: tool.read_only || tool.idempotent || tool.kind == ToolKind::Reader,
        })
    }

    /// The call, from its row or made now. `used` counts the calls of each tool in this
    /// step; the rows of calls made go into `writes`, committed before anything goes on
    /// from an effect.
    pub(super) async fn make(
        &self,
        tools: &Tools<'_>,
        rows: &mut Rows<'_>,
        used: &mut BTreeMap<String, u64>,
        writes: &mut Vec<Write>,
    ) -> Result<Outcome, TryError> {
        let tool = self.tool;
        *used.entry(tool.name.clone()).or_default() += 1;
        // A call that already ran, or that a person decided.
        if let Some(done) = rows.get(&(self.key.seq, self.key.call)) {
            if done.args_hash != journal::args_hash(&self.stored_args) {
                return Err(fatal(
                    self.cx,
                    &codes::JOURNAL_DIVERGENCE,
                    format!(
                        "the call {} of `{}` is recorded with other arguments than the model's turn gives",
                        self.key.display(),
                        tool.name
                    ),
                ));
            }
            if let Some(outcome) = transcript::replayed(done, &self.key.display(), &tool.name) {
                return outcome;
            }
        }
        // `limits`: beyond its cap a tool is not called; the model is told.
        if let Some(cap) = tools.limits.get(&tool.name)
            && used.get(&tool.name).copied().unwrap_or(0) > *cap
        {
            let text = format!(
                "The call was refused: `{}` may be called at most {cap} time(s) in this step, and that is used up.",
                tool.name
            );
            return Ok(self.refused(text, rows, writes));
        }
        let args = match project(tool, &self.requested.arguments) {
            Ok(a) => a,
            Err(problem) => {
                let text = format!("The call was not made: {problem}.");
                return Ok(self.refused(text, rows, writes));
            }
        };
        // `approve`: the call waits at its own gate, which shows exactly these arguments.
        if tools.approve.contains(&tool.name)
            && let Some(text) = self.approval(writes).await?
        {
            return Ok(self.refused(text, rows, writes));
        }
        if tool.kind == ToolKind::Reader {
            return self.read(&args, rows, writes).await;
        }
        self.call(args, tools.timeout_ms, rows, writes).await
    }

    /// A row of this call, written now.
    pub(super) fn row(
        &self,
        kind: CallKind,
        state: CallState,
        result: Option<Value>,
        error: Option<String>,
    ) -> CallRec {
        Row {
            kind,
            target: &self.tool.name,
            args: Some(self.stored_args.clone()),
            idempotent: self.repeatable,
            idem_key: self.idem_key.clone(),
            state,
            result,
            error,
        }
        .rec(self.cx)
    }

    /// A call that is not made (over its limit, with arguments the tool does not take, or
    /// refused at its approval gate): its row says why, and so is the model told.
    fn refused(&self, text: String, rows: &mut Rows<'_>, writes: &mut Vec<Write>) -> Outcome {
        let rec = self.row(
            CallKind::Tool,
            CallState::Refused,
            Some(json!({ "for_model": text })),
            None,
        );
        writes.push(Write::Call(self.key.clone(), rec.clone()));
        rows.insert((self.key.seq, self.key.call), rec);
        Outcome::told(text)
    }

    /// The call made on its server: journaled first when it has effects, its end
    /// committed before anything goes on from it.
    async fn call(
        &self,
        args: Map<String, Value>,
        timeout_ms: Option<u64>,
        rows: &mut Rows<'_>,
        writes: &mut Vec<Write>,
    ) -> Result<Outcome, TryError> {
        let shared = self.cx.shared;
        let tool = self.tool;
        // A server that may ask a person: the call carries the answers so far (and
        // waits, before anything is journaled, while one is unanswered).
        let questions = asks_people(&shared.plan, &tool.server).then(|| Questions {
            cx: self.cx,
            call: self.key.display(),
            server: &tool.server,
            tool: &tool.name,
        });
        let resumption = match &questions {
            Some(q) => q.resumption().await?,
            None => Resumption::default(),
        };
        // An effect is journaled before it is made.
        if !self.repeatable {
            let rec = self.row(CallKind::Tool, CallState::Started, None, None);
            writes.push(Write::Event(Event::CallStarted {
                node: self.cx.unit.node.name.clone(),
                call: self.key.display(),
                args_hash: rec.args_hash.clone(),
            }));
            writes.push(Write::Call(self.key.clone(), rec));
            self.commit(writes).await?;
        }
        let mut meta = Map::new();
        meta.insert(
            IDEMPOTENCY_META.into(),
            Value::String(self.idem_key.clone()),
        );
        let limit = tool
            .max_result_bytes
            .unwrap_or(results::DEFAULT_MAX_RESULT_BYTES);
        let options = RequestOptions {
            timeout: timeout_ms.or(tool.timeout_ms).map(Duration::from_millis),
            limit: Some((limit as usize).saturating_mul(2).saturating_add(64 * 1024)),
            task: tool.task != pipec_plan::ToolTask::Forbidden,
        };
        let shown = shared
            .trace
            .as_ref()
            .filter(|t| t.content())
            .map(|_| Value::Object(args.clone()));
        let send = |meta| {
            shared.resources.servers.call(
                &tool.server,
                &tool.wire_name,
                args,
                meta,
                options,
                &resumption,
            )
        };
        let result = match &shared.trace {
            Some(t) => {
                let call = self.key.display();
                let of = crate::trace::CallOf {
                    node: &self.cx.unit.node.name,
                    call: &call,
                    server: &tool.server,
                    tool: &tool.name,
                    arguments: shown.as_ref(),
                };
                let scrub = |m: &str| shared.scrubber.scrub(m);
                t.tool_call(of, meta, scrub, send).await
            }
            None => send(meta).await,
        };
        // A call the server runs as a task is polled here (a crash meanwhile leaves an
        // effect's row unfinished, for a person).
        let result = match result {
            Ok(Called::Task(task)) => {
                shared
                    .resources
                    .servers
                    .await_task(&tool.server, &task, options, &resumption)
                    .await
            }
            other => other,
        };
        let result = match result {
            Ok(Called::Result(r)) => r,
            Ok(Called::Task(task)) => {
                return self.failed(
                    McpError::Protocol {
                        server: tool.server.clone(),
                        message: format!("the task {} ended in another task", task.id),
                    },
                    limit,
                    rows,
                    writes,
                );
            }
            Ok(Called::Asked(asked)) => {
                let Some(q) = &questions else {
                    return Err(fatal(
                        self.cx,
                        &codes::INTERNAL_ERROR,
                        format!("the server `{}` asked a person", tool.server),
                    ));
                };
                // Its row says it is made again once answered (not an unfinished effect).
                if !self.repeatable {
                    let rec = self.row(CallKind::Tool, CallState::Asked, None, None);
                    writes.push(Write::Call(self.key.clone(), rec));
                }
                return Err(q.ask(asked, writes).await);
            }
            Err(e) => return self.failed(e, limit, rows, writes),
        };
        let refs = match manifest::lift(
            &shared.plan,
            tool,
            &result,
            &stored_args_object(&self.stored_args, tool),
            &self.key.display(),
        ) {
            Ok(r) => r,
            Err(m) => {
                let message = shared
                    .scrubber
                    .scrub(&format!("`{}` returned {m}", tool.name));
                // The row goes with the node's failure, in the unit's last commit.
                writes.push(Write::Call(
                    self.key.clone(),
                    self.finished(
                        CallState::ToolError,
                        String::new(),
                        &[],
                        None,
                        Some(message.clone()),
                    ),
                ));
                return Err(fatal(self.cx, &codes::MALFORMED_LINK, message));
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
                Err(ResultError::Tool(t)) => {
                    (CallState::ToolError, format!("The tool failed: {t}"))
                }
            }
        };
        let text = shared.scrubber.scrub(&text);
        let rec = self.finished(state, text.clone(), &refs, Some(summary), None);
        writes.push(Write::Call(self.key.clone(), rec.clone()));
        if !self.repeatable {
            // The effect's end is durable before anything goes on from it.
            self.commit(writes).await?;
        }
        rows.insert((self.key.seq, self.key.call), rec);
        Ok(Outcome { text, links: refs })
    }

    /// A call the server did not answer with a result. When the try ends here, the
    /// call's row stays in `writes`, which the unit commits with its end: the row and the
    /// node's failure (or the thread's block) are stored together or not at all, and a
    /// `started` row left alone is an unfinished effect that a resume asks a person about.
    fn failed(
        &self,
        e: McpError,
        limit: u64,
        rows: &mut Rows<'_>,
        writes: &mut Vec<Write>,
    ) -> Result<Outcome, TryError> {
        let node = &self.cx.unit.node;
        let message = self.cx.shared.scrubber.scrub(&format!(
            "`{}` calling `{}`: {e}",
            node.name, self.tool.name
        ));
        let failure = call_failure(&e, self.repeatable, message.clone(), &node.name);
        let ends_the_try = match &failure {
            TryError::Unknown(_) => {
                let mut rec =
                    self.finished(CallState::Unknown, String::new(), &[], None, Some(message));
                rec.result = None;
                writes.push(Write::Call(self.key.clone(), rec));
                return Err(failure);
            }
            // Nothing happened, or it may happen again safely (the node tries again); or
            // the server refused pipec's credentials, which the model cannot mend (the
            // node fails, as a `call` node would).
            TryError::Transient { .. } => true,
            _ => e.refused_credentials(),
        };
        if ends_the_try {
            if !self.repeatable {
                let rec = self.finished(
                    CallState::ToolError,
                    String::new(),
                    &[],
                    None,
                    Some(message),
                );
                writes.push(Write::Call(self.key.clone(), rec));
            }
            return Err(failure);
        }
        // The server refused the call: the model is told, and may do otherwise. A
        // result read past is told like one over the limit once read: ask for less.
        let text = match &e {
            McpError::TooLarge { .. } => {
                format!("The result was over the limit of {limit} bytes; ask for less.")
            }
            _ => format!("The tool failed: {e}"),
        };
        let rec = self.finished(CallState::ToolError, text.clone(), &[], None, Some(message));
        writes.push(Write::Call(self.key.clone(), rec.clone()));
        rows.insert((self.key.seq, self.key.call), rec);
        Ok(Outcome::told(self.cx.shared.scrubber.scrub(&text)))
    }

    /// The row that ends the call: what the model was shown (cut to what a row keeps),
    /// the result's summary and its links.
    fn finished(
        &self,
        state: CallState,
        text: String,
        links: &[ResourceRef],
        summary: Option<Value>,
        error: Option<String>,
    ) -> CallRec {
        let mut kept = json!({ "for_model": transcript::kept_text(&text) });
        if let Some(s) = summary {
            kept["result"] = s;
        }
        if !links.is_empty() {
            kept["links"] = serde_json::to_value(links).unwrap_or(Value::Null);
        }
        self.row(CallKind::Tool, state, Some(kept), error)
    }

    /// Commits what the turn wrote so far; a commit that fails ends the try.
    pub(super) async fn commit(&self, writes: &mut Vec<Write>) -> Result<(), TryError> {
        self.cx
            .shared
            .commit(std::mem::take(writes))
            .await
            .map_err(|e| TryError::Fatal(e.stored(Some(&self.cx.unit.node.name))))
    }
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

/// The stored arguments of a call under the server's names (what a heal replays).
fn stored_args_object(stored: &Value, tool: &Tool) -> Value {
    match project(tool, stored) {
        Ok(m) => Value::Object(m),
        Err(_) => stored.clone(),
    }
}
