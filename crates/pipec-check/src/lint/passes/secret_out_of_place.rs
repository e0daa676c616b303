//! The pass that reports P0603 secret-out-of-place.

use crate::hir::{Body, Source, SourceKind};
use crate::lint::LintContext;
use pipec_base::source::Span;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules::SECRET_OUT_OF_PLACE;

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
                    Diagnostic::new(&SECRET_OUT_OF_PLACE, node.info.file, span, format!("a secret cannot reach {}", crate::hir::describe_node(node.kind, &node.info.name)))
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
