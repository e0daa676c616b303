//! The pass that reports P0502 unused-node.

use crate::graph::source_deps;
use crate::lint::LintContext;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules::UNUSED_NODE;
use pipec_syntax::ast::NodeKind;

/// For each node, whether a node, `after` or an output refers to it (`data_only`: only
/// through a binding).
pub(crate) fn referenced(hir: &crate::hir::Hir, data_only: bool) -> Vec<bool> {
    let mut used = vec![false; hir.nodes.len()];
    let mut deps = Vec::new();
    for n in &hir.nodes {
        deps.clear();
        for p in &n.params {
            source_deps(&p.source, &mut deps);
        }
        if !data_only {
            deps.extend(n.after.iter().map(|(a, _)| *a));
        }
        for d in &deps {
            used[*d as usize] = true;
        }
    }
    for o in &hir.outputs {
        deps.clear();
        source_deps(&o.source, &mut deps);
        for d in &deps {
            used[*d as usize] = true;
        }
    }
    used
}

pub(crate) fn check(cx: &LintContext<'_>, out: &mut Vec<Diagnostic>) {
    let hir = cx.hir;
    let used = referenced(hir, false);
    for (i, node) in hir.nodes.iter().enumerate() {
        if used[i] || matches!(node.kind, NodeKind::Act | NodeKind::Gate) {
            continue;
        }
        out.push(
            Diagnostic::new(
                &UNUSED_NODE,
                node.info.file,
                node.info.name_span,
                format!("nothing uses the output of `{}`", node.info.name),
            )
            .label("unused node")
            .help(format!(
                "bind it downstream, make it an output (`output {0} = {0}`), or remove it",
                node.info.name
            )),
        );
    }
}
