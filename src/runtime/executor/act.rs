//! `act` nodes: a model in a loop with MCP tools that have effects, journaled call by
//! call. Running them needs the MCP client; until then an `act` node fails with `R0005`
//! (and `pipec run` refuses a plan that has one before anything starts).

use super::{Executor, TryContext, TryFuture, fatal};
use crate::diagnostic::{self as codes, Rule};
use crate::plan::{Body, Node};

pub(crate) struct Act;

impl Executor for Act {
    fn call_kind(&self) -> &'static str {
        "model"
    }

    fn journaled(&self, _node: &Node) -> bool {
        false
    }

    fn target(&self, node: &Node) -> String {
        match &node.body {
            Body::Model { model, .. } => model.clone(),
            _ => String::new(),
        }
    }

    fn failure_rule(&self) -> &'static Rule {
        &codes::MCP_SERVER_FAILED
    }

    fn supported(&self) -> bool {
        false
    }

    fn key_per_step(&self) -> bool {
        true
    }

    fn run<'a>(&'a self, cx: TryContext<'a>) -> TryFuture<'a> {
        Box::pin(async move {
            Err(fatal(
                &cx,
                &codes::NOT_SUPPORTED,
                format!(
                    "`{}` acts through MCP tools, and this version of pipec does not run MCP tools yet",
                    cx.unit.node.name
                ),
            ))
        })
    }
}
