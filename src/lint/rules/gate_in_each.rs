//! P0508 gate-in-each.

crate::declare_rule! {
    /// ## What it catches
    /// A gate with an `each` parameter.
    ///
    /// ## Why it matters
    /// A gate is answered once, by name; a gate per item would need an answer per item, which
    /// pipec does not support yet. Ask once about the whole list, and let the answer steer the
    /// nodes that fan out after it.
    ///
    /// ## Example
    /// ```pipe
    /// gate approve(email: Email = each(history.emails)) -> Approval {
    ///   message = "Reply to {{ email.subject }}?"
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// gate approve(emails: Email[] = history.emails) -> Approval {
    ///   message = "Reply to these {{ emails | length }} emails?"
    /// }
    /// ```
    pub static GATE_IN_EACH = {
        code: "P0508",
        name: "gate-in-each",
        severity: Error,
        summary: "a gate with an each parameter",
    };
}

use crate::diagnostic::Diagnostic;
use crate::lint::LintContext;
use crate::syntax::ast::NodeKind;

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
