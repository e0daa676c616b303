//! P0603 secret-out-of-place.

crate::declare_rule! {
    /// ## What it catches
    /// `secret("X")` anywhere but a server's `env`, a model's `api_key`, or a parameter of a
    /// `node` or `act` whose body is a `call` (to pass it as an argument), an `exec` or a `host`.
    /// It is refused in the parameters of `think`, `agent` and `gate` nodes and of `act` loops,
    /// in `return` nodes, in resource URIs, and in outputs.
    ///
    /// ## Why it matters
    /// pipec never stores a secret. Prompts go to a model provider, gate messages are shown to
    /// people, and node outputs are checkpointed and printed; a secret that reached any of them
    /// would leak. In the allowed places it goes straight to a server, an endpoint or a process.
    ///
    /// ## Example
    /// ```pipe
    /// agent research(
    ///   deal_id: string = input.deal_id,
    ///   token: string = secret("CRM_TOKEN"),
    /// ) -> DealSummary {
    ///   model = fast
    ///   prompt = file("research/scan")
    ///   tools = [get_deal]
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// server crm {
    ///   command = "pipec-demo-crm"
    ///   env = { CRM_TOKEN: secret("CRM_TOKEN") }
    /// }
    ///
    /// agent research(deal_id: string = input.deal_id) -> DealSummary {
    ///   model = fast
    ///   prompt = file("research/scan")
    ///   tools = [get_deal]
    /// }
    /// ```
    pub static SECRET_OUT_OF_PLACE = {
        code: "P0603",
        name: "secret-out-of-place",
        severity: Error,
        summary: "a secret bound where it could be stored or shown",
    };
}

use crate::check::hir::{Body, Source, SourceKind};
use crate::diagnostic::Diagnostic;
use crate::lint::LintContext;
use crate::source::Span;

pub(crate) fn check(cx: &LintContext<'_>, out: &mut Vec<Diagnostic>) {
    let hir = cx.hir;
    for node in &hir.nodes {
        let allowed = matches!(
            node.body,
            Body::Call { .. } | Body::Exec { .. } | Body::Host { .. } | Body::Invalid
        );
        if allowed {
            continue;
        }
        for p in &node.params {
            let mut found = Vec::new();
            secrets(&p.source, &mut found);
            for span in found {
                out.push(
                    Diagnostic::new(&SECRET_OUT_OF_PLACE, node.info.file, span, format!("a secret cannot reach {}", crate::check::hir::describe_node(node.kind, &node.info.name)))
                        .label("secret")
                        .help("secrets go only into server `env`, model `api_key`, and the parameters of `call`, `exec` and `host` nodes; a prompt, a gate or a stored value would leak it"),
                );
            }
        }
    }
    for o in &hir.outputs {
        let mut found = Vec::new();
        secrets(&o.source, &mut found);
        for span in found {
            out.push(
                Diagnostic::new(
                    &SECRET_OUT_OF_PLACE,
                    o.info.file,
                    span,
                    format!("a secret cannot be the output `{}`", o.info.name),
                )
                .label("secret")
                .help("outputs are printed and stored; never output a secret"),
            );
        }
    }
}

fn secrets(src: &Source, out: &mut Vec<Span>) {
    match &src.kind {
        SourceKind::Secret { .. } => out.push(src.span),
        SourceKind::Join(s) | SourceKind::List(s) => s.iter().for_each(|x| secrets(x, out)),
        SourceKind::Record(f) => f.iter().for_each(|(_, x)| secrets(x, out)),
        SourceKind::Each { inner, .. } => secrets(inner, out),
        _ => {}
    }
}
