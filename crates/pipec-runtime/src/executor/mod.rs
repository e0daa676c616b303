//! One executor per kind of node that is not pure: `exec` (a subprocess), `host` (a
//! function of the embedding program), `think` (one model call, with repairs), `call`
//! (one MCP tool call), `agent` and `act` (a model in a loop with tools), and `return`
//! nodes that fetch resources (`pure.rs`). Each says how its calls are journaled, what
//! the journal names as the callee, and what a failure is; the retry loop (`tries.rs`)
//! is the same for all. A new node kind is a file here and a line in [`for_node`].

mod agent;
mod call;
mod client_model;
mod exec;
mod host;
mod pure;
pub(crate) mod questions;
mod think;
pub(crate) mod tries;

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use crate::context::AttemptContext;
pub(crate) use crate::error::TryError;
use pipec_diagnostic::Rule;
use pipec_plan::{Body, Node, NodeKind, Plan};
use pipec_store::{CallKind, CallRec, ResourceRef, Watcher, Write};
use tries::Unit;

/// A boxed future of an executor's try.
pub(crate) type TryFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, TryError>> + Send + 'a>>;

/// What a try can use.
pub(crate) struct TryContext<'a> {
    pub shared: &'a AttemptContext,
    pub unit: &'a Unit,
    /// The key handed to the callee; the same for every try of the call.
    pub idem_key: String,
    /// The try's `started` row, when the executor journals its tries.
    pub started: Option<&'a CallRec>,
    /// Rows and events the try produced (model turns), committed with its result.
    pub writes: &'a mut Vec<Write>,
    /// The resource links its tool calls returned, in call order.
    pub manifest: &'a mut Vec<ResourceRef>,
}

/// A kind of node that runs as a task.
pub(crate) trait Executor: Sync {
    /// The journal's word for this kind of call (`exec`, `host`, `model`, `tool`).
    fn call_kind(&self) -> CallKind;

    /// Whether each try must be journaled (a committed `started` row) before it runs:
    /// an effect that is not idempotent.
    fn journaled(&self, plan: &Plan, node: &Node) -> bool;

    /// Whether a try may simply run again, costing nothing a user pays for and changing
    /// nothing (a pure body, a read-only or idempotent call or command): the result of
    /// an item may then wait for the attempt's next commit ([`crate::deferred`]). A model
    /// turn is paid for, so none of the model executors says so.
    fn free_to_redo(&self, _plan: &Plan, _node: &Node) -> bool {
        false
    }

    /// What the journal names as the callee (the command, the function, the model).
    fn target(&self, node: &Node) -> String;

    /// The code of a try that ran out of time, and of the last transient failure when
    /// the retries are used up and it carries none.
    fn failure_rule(&self) -> &'static Rule;

    /// Whether each step is a call of its own, with its own idempotency key (model
    /// turns), rather than a try of the same call.
    fn key_per_step(&self) -> bool {
        false
    }

    /// What watches the processes a try starts, for its `started` row (executors that
    /// start processes: their reaper).
    fn watcher(&self) -> Option<Watcher> {
        None
    }

    /// One try.
    fn run<'a>(&'a self, cx: TryContext<'a>) -> TryFuture<'a>;
}

/// The executor of a node that runs as a task; `None` for gates. A `return` node runs
/// as a task only when it fetches resources; otherwise the scheduler computes it.
pub(crate) fn for_node(node: &Node) -> Option<&'static dyn Executor> {
    Some(match (&node.body, node.kind) {
        (Body::Exec { .. }, _) => &exec::Exec,
        (Body::Host { .. }, _) => &host::Host,
        (Body::Call { .. }, _) => &call::Call,
        (Body::Model { .. }, NodeKind::Agent | NodeKind::Act) => &agent::Loop,
        (Body::Model { .. }, _) => &think::Think,
        (Body::Return { .. }, _) => &pure::Pure,
        (Body::Gate { .. }, _) => return None,
    })
}

/// The prompt of the node of `cx` as chat messages, rendered over its parameters as
/// templates see them (optional fields left out present as none) and `output_schema`,
/// the closed schema of its output. A prompt that does not render is R0204, naming the
/// value and what to write.
pub(crate) fn render_prompt(
    cx: &TryContext<'_>,
    prompt: &pipec_plan::Template,
    output_schema: &Value,
) -> Result<Vec<crate::llm::Message>, TryError> {
    let node = &cx.unit.node;
    let mut context = crate::prompt::template_context(node, &cx.unit.params, &cx.shared.plan.defs);
    context.insert(
        "output_schema".into(),
        Value::String(serde_json::to_string_pretty(output_schema).unwrap_or_default()),
    );
    crate::prompt::render_messages(prompt, &context).map_err(|e| {
        let scrub = |text: &str| cx.shared.scrubber.scrub(text);
        let mut error = super::error::RuntimeError::new(
            &pipec_diagnostic::TEMPLATE_RENDER_FAILED,
            scrub(&format!(
                "the prompt of `{}` does not render: {e}",
                node.name
            )),
        );
        if let Some(help) = e.help() {
            error = error.help(scrub(&help));
        }
        TryError::Fatal(error.stored(Some(&node.name)))
    })
}

/// A fatal error about the node of `cx`.
pub(crate) fn fatal(cx: &TryContext<'_>, rule: &'static Rule, message: String) -> TryError {
    TryError::Fatal(super::error::RuntimeError::new(rule, message).stored(Some(&cx.unit.node.name)))
}
