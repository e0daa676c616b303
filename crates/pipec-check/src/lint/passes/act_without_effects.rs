//! The pass that reports P0602 act-without-effects.

use crate::hir::Body;
use crate::lint::LintContext;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules::ACT_WITHOUT_EFFECTS;
use pipec_syntax::ast::NodeKind;

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
