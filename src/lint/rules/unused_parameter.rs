//! P0403 unused-parameter.

crate::declare_rule! {
    /// ## What it catches
    /// A parameter that nothing in its node reads: not the prompt, `return`, `call` arguments,
    /// `when`, a URI template or a `where:`. Never reported for `exec` and `host` nodes (their
    /// stdin gets every parameter) or for gates (a gate's parameters place it in the graph).
    ///
    /// ## Why it matters
    /// Every binding is an edge: the node waits for a value it then ignores, and a resource
    /// parameter is fetched for nothing. Often the prompt was meant to use it and does not. For
    /// ordering without data, use `after = [node]`.
    ///
    /// ## Example
    /// ```pipe
    /// think consume(
    ///   digest: Digest = digest,
    ///   history: EmailPage = resource(ref: "email-history", max_bytes: 200kb),
    /// ) -> Brief {
    ///   model = fast
    ///   prompt = "Write a call brief from {{ digest }}."
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// think consume(
    ///   digest: Digest = digest,
    ///   history: EmailPage = resource(ref: "email-history", max_bytes: 200kb),
    /// ) -> Brief {
    ///   model = fast
    ///   prompt = "Write a call brief from {{ digest }} and these emails: {{ history.emails }}."
    /// }
    /// ```
    /// or remove the parameter.
    pub static UNUSED_PARAMETER = {
        code: "P0403",
        name: "unused-parameter",
        severity: Warning,
        summary: "a parameter that nothing in its node uses",
    };
}

use crate::check::hir::Body;
use crate::diagnostic::Diagnostic;
use crate::lint::LintContext;
use crate::syntax::ast::NodeKind;

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
