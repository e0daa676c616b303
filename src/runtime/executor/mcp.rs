//! The tool-loop node kinds: `agent` (a model in a loop with read-only tools) and `act`
//! (a model in a loop with tools that have effects, journaled call by call). Until they
//! run, `pipec run` refuses a plan that has one before anything starts
//! ([`Executor::supported`]), and a node that is reached anyway fails with `R0005`.

use super::{Executor, TryContext, TryFuture, fatal};
use crate::diagnostic::{self as codes, Rule};
use crate::plan::{Body, Node, Plan};

/// A tool-loop node kind, not run yet.
pub(crate) struct Mcp {
    /// The journal's word for its calls.
    kind: &'static str,
    /// What the node does, for the error.
    does: &'static str,
    /// A loop's model turns are calls of their own.
    per_step: bool,
}

pub(crate) static AGENT: Mcp = Mcp {
    kind: "model",
    does: "is an agent with MCP tools",
    per_step: true,
};

pub(crate) static ACT: Mcp = Mcp {
    kind: "model",
    does: "acts through MCP tools",
    per_step: true,
};

impl Executor for Mcp {
    fn call_kind(&self) -> &'static str {
        self.kind
    }

    fn journaled(&self, _plan: &Plan, _node: &Node) -> bool {
        false
    }

    fn target(&self, node: &Node) -> String {
        match &node.body {
            Body::Call { tool, .. } => tool.clone(),
            Body::Model { model, .. } => model.clone(),
            _ => String::new(),
        }
    }

    fn failure_rule(&self) -> &'static Rule {
        &codes::MCP_SERVER_FAILED
    }

    fn key_per_step(&self) -> bool {
        self.per_step
    }

    fn supported(&self) -> bool {
        false
    }

    fn run<'a>(&'a self, cx: TryContext<'a>) -> TryFuture<'a> {
        Box::pin(async move {
            Err(fatal(
                &cx,
                &codes::NOT_SUPPORTED,
                format!(
                    "`{}` {}, and this version of pipec does not run MCP tools yet",
                    cx.unit.node.name, self.does
                ),
            ))
        })
    }
}
