//! The pass that reports P0403 unused-parameter.

use crate::hir::Body;
use crate::lint::LintContext;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules::UNUSED_PARAMETER;
use pipec_syntax::ast::NodeKind;

pub(crate) fn check(cx: &LintContext<'_>, out: &mut Vec<Diagnostic>) {
    for node in &cx.hir.nodes {
        let exempt = node.kind == NodeKind::Gate
            || matches!(
                node.body,
                Body::Exec { .. } | Body::Host { .. } | Body::Invalid
            );
        if exempt {
            continue;
        }
        for p in node.params.iter().filter(|p| !p.used) {
            let fetched = if p.fetches() {
                "; it is even fetched for nothing"
            } else {
                ""
            };
            out.push(
                Diagnostic::new(&UNUSED_PARAMETER, node.info.file, p.name_span, format!("the parameter `{}` of `{}` is never used{fetched}", p.name, node.info.name))
                    .label("unused")
                    .help("use it (in the prompt, `return`, `call`, `when` or a URI), remove it, or order the node with `after = [node]`"),
            );
        }
    }
}
