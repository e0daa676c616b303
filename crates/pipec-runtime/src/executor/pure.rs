//! `return` nodes that fetch resources: computed like any pure node, but as a task,
//! since their parameters are read from servers first. Nothing is journaled; the value is
//! committed before anything reads it, as the fetched content is not stored to compute
//! it again from.

use super::{Executor, TryContext, TryFuture, fatal};
use crate::eval;
use pipec_diagnostic::{self as codes, Rule};
use pipec_plan::{Body, Node, Plan};
use pipec_store::CallKind;

pub(crate) struct Pure;

impl Executor for Pure {
    fn call_kind(&self) -> CallKind {
        CallKind::Return
    }

    fn journaled(&self, _plan: &Plan, _node: &Node) -> bool {
        false
    }

    fn free_to_redo(&self, _plan: &Plan, _node: &Node) -> bool {
        true
    }

    fn target(&self, _node: &Node) -> String {
        String::new()
    }

    fn failure_rule(&self) -> &'static Rule {
        &codes::EVALUATION_FAILED
    }

    fn run<'a>(&'a self, cx: TryContext<'a>) -> TryFuture<'a> {
        Box::pin(async move {
            let node = &cx.unit.node;
            let Body::Return { value } = &node.body else {
                return Err(fatal(
                    &cx,
                    &codes::INTERNAL_ERROR,
                    format!("`{}` is not a `return` node", node.name),
                ));
            };
            eval::returned(&cx.unit.params, value).map_err(|e: eval::EvalError| {
                fatal(&cx, e.rule(), format!("`return` of `{}`: {e}", node.name))
            })
        })
    }
}
