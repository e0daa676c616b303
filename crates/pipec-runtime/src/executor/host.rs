//! `host` nodes: a function registered by the program that embeds pipec. Treated as
//! idempotent (it is the program's code; it can journal on its own if it must).

use serde_json::Value;

use super::{Executor, TryContext, TryError, TryFuture, fatal};
use crate::validate::Mode;
use pipec_diagnostic::{self as codes, Rule};
use pipec_plan::{Body, Node, Plan};
use pipec_store::CallKind;

pub(crate) struct Host;

impl Executor for Host {
    fn call_kind(&self) -> CallKind {
        CallKind::Host
    }

    fn journaled(&self, _plan: &Plan, _node: &Node) -> bool {
        false
    }

    fn free_to_redo(&self, _plan: &Plan, _node: &Node) -> bool {
        true
    }

    fn target(&self, node: &Node) -> String {
        match &node.body {
            Body::Host { function } => function.clone(),
            _ => String::new(),
        }
    }

    fn failure_rule(&self) -> &'static Rule {
        &codes::HOST_FUNCTION_FAILED
    }

    fn run<'a>(&'a self, cx: TryContext<'a>) -> TryFuture<'a> {
        Box::pin(run(cx))
    }
}

async fn run(cx: TryContext<'_>) -> Result<Value, TryError> {
    let node = &cx.unit.node;
    let Body::Host { function } = &node.body else {
        return Err(fatal(
            &cx,
            &codes::INTERNAL_ERROR,
            format!("`{}` is not a `host` node", node.name),
        ));
    };
    let Some(f) = cx.shared.hosts.get(function) else {
        return Err(fatal(
            &cx,
            &codes::HOST_FUNCTION_MISSING,
            format!("no host function `{function}` is registered"),
        ));
    };
    let mut out = f(Value::Object(cx.unit.params.clone().into_iter().collect()))
        .await
        .map_err(|e| TryError::Transient {
            rule: &codes::HOST_FUNCTION_FAILED,
            message: cx
                .shared
                .scrubber
                .scrub(&format!("the host function `{function}` failed: {e}")),
        })?;
    cx.shared
        .validators
        .check(&node.output, &out, Mode::Open)
        .map_err(|e| {
            fatal(
                &cx,
                &codes::HOST_OUTPUT_INVALID,
                cx.shared.scrubber.scrub(&format!(
                    "the host function `{function}` returned something that does not fit `{}`: {e}",
                    node.output_type
                )),
            )
        })?;
    // What the type does not declare no node can read: it is not kept.
    cx.shared.validators.keep_declared(&node.output, &mut out);
    Ok(out)
}
