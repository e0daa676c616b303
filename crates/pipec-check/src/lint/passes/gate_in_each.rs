//! The pass that reports P0508 gate-in-each.

use crate::lint::LintContext;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules::GATE_IN_EACH;
use pipec_syntax::ast::NodeKind;

pub(crate) fn check(cx: &LintContext<'_>, out: &mut Vec<Diagnostic>) {
    for node in &cx.hir.nodes {
        if node.kind != NodeKind::Gate {
            continue;
        }
        if let Some(i) = node.each {
            let p = &node.params[i];
            out.push(
                Diagnostic::new(
                    &GATE_IN_EACH,
                    node.info.file,
                    p.source.span,
                    format!("the gate `{}` cannot fan out", node.info.name),
                )
                .label("`each` on a gate")
                .help("pass the whole list to the gate and let the answer cover every item"),
            );
        }
    }
}
