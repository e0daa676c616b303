//! The pass that reports P0504 gate-without-consumer.

use crate::lint::LintContext;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules::GATE_WITHOUT_CONSUMER;
use pipec_syntax::ast::NodeKind;

pub(crate) fn check(cx: &LintContext<'_>, out: &mut Vec<Diagnostic>) {
    let hir = cx.hir;
    let read = super::unused_node::referenced(hir, true);
    for (i, node) in hir.nodes.iter().enumerate() {
        if node.kind != NodeKind::Gate || read[i] {
            continue;
        }
        out.push(
            Diagnostic::new(
                &GATE_WITHOUT_CONSUMER,
                node.info.file,
                node.info.name_span,
                format!("nothing reads the answer to the gate `{}`", node.info.name),
            )
            .label("its answer changes nothing")
            .help(format!(
                "bind it where the answer matters: `ack: T = {}` with `when = ack.approved`",
                node.info.name
            )),
        );
    }
}
