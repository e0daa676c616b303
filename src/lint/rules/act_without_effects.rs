//! P0602 act-without-effects.

crate::declare_rule! {
    /// ## What it catches
    /// An `act` whose tools (or whose `call`) are all read-only.
    ///
    /// ## Why it matters
    /// `act` marks where effects happen; readers look for it to see what a pipeline changes. An
    /// `act` that changes nothing is a false alarm, and it often means a mutating tool was
    /// declared `read_only = true` by mistake. An `agent` runs the same read-only loop.
    ///
    /// ## Example
    /// ```pipe
    /// act research(deal_id: string = input.deal_id) -> DealSummary {
    ///   model = fast
    ///   prompt = file("research/scan")
    ///   tools = [get_deal, read_emails]
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// agent research(deal_id: string = input.deal_id) -> DealSummary {
    ///   model = fast
    ///   prompt = file("research/scan")
    ///   tools = [get_deal, read_emails]
    /// }
    /// ```
    pub static ACT_WITHOUT_EFFECTS = {
        code: "P0602",
        name: "act-without-effects",
        severity: Warning,
        summary: "an act whose tools are all read-only",
    };
}

use crate::check::hir::Body;
use crate::diagnostic::Diagnostic;
use crate::lint::LintContext;
use crate::syntax::ast::NodeKind;

pub(crate) fn check(cx: &LintContext<'_>, out: &mut Vec<Diagnostic>) {
    let hir = cx.hir;
    for node in &hir.nodes {
        if node.kind != NodeKind::Act {
            continue;
        }
        let tools = match &node.body {
            Body::Call { tool, .. } => vec![*tool],
            Body::Model { tools, .. } => tools.clone(),
            _ => continue,
        };
        if tools
            .iter()
            .all(|t| hir.tool(*t).read_only || hir.tool(*t).is_reader)
        {
            let suggestion = if matches!(node.body, Body::Call { .. }) {
                "node"
            } else {
                "agent"
            };
            out.push(
                Diagnostic::new(&ACT_WITHOUT_EFFECTS, node.info.file, node.kind_span, format!("`{}` is an `act`, but all its tools only read", node.info.name))
                    .label("no effects")
                    .help(format!("declare it `{suggestion}` (an `act` marks where effects happen), or fix the tools' `read_only`")),
            );
        }
    }
}
