//! `call` nodes: one MCP tool call with arguments from the node's body. Running them needs
//! the MCP client; until then a `call` node fails with `R0005` (and `pipec run` refuses
//! a plan that has one before anything starts).

use super::{Executor, TryContext, TryFuture, fatal};
use crate::diagnostic::{self as codes, Rule};
use crate::plan::{Body, Node};

pub(crate) struct Call;

impl Executor for Call {
    fn call_kind(&self) -> &'static str {
        "tool"
    }

    fn journaled(&self, _node: &Node) -> bool {
        false
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

    fn supported(&self) -> bool {
        false
    }

    fn run<'a>(&'a self, cx: TryContext<'a>) -> TryFuture<'a> {
        Box::pin(async move {
            Err(fatal(
                &cx,
                &codes::NOT_SUPPORTED,
                format!(
                    "`{}` calls an MCP tool, and this version of pipec does not run MCP tools yet",
                    cx.unit.node.name
                ),
            ))
        })
    }
}
