//! The pass that reports P0507 unbounded-fan-out.

use crate::hir::{Body, Hir, SourceKind};
use crate::lint::LintContext;
use crate::lint::edit::append_argument;
use pipec_diagnostic::rules::UNBOUNDED_FAN_OUT;
use pipec_diagnostic::{Applicability, Diagnostic, Fix};

pub(crate) fn check(cx: &LintContext<'_>, out: &mut Vec<Diagnostic>) {
    let hir = cx.hir;
    for node in &hir.nodes {
        for p in &node.params {
            let SourceKind::Each { inner, max: None } = &p.source.kind else {
                continue;
            };
            let Some(origin) = unbounded_origin(hir, &inner.kind) else {
                continue;
            };
            let mut d = Diagnostic::new(&UNBOUNDED_FAN_OUT, node.info.file, p.source.span, format!("`{}` fans out over a list {origin}, with no bound", node.info.name))
                .label("no `max:`")
                .help("bound it: `each(list, max: 100)` fails the node on a longer list instead of running without limit");
            if let Some(edit) = append_argument(cx.db, node.info.file, p.source.span, "max: 100") {
                // A bound fails runs that went through before: a person should pick it.
                d = d.fix(Fix {
                    title: "add `max: 100`".to_string(),
                    applicability: Applicability::Unsafe,
                    edits: vec![edit],
                });
            }
            out.push(d);
        }
    }
}

/// Where an unbounded list comes from, if it is a tool, a model or links.
fn unbounded_origin(hir: &Hir, src: &SourceKind) -> Option<&'static str> {
    match src {
        SourceKind::Link(_) => Some("of links"),
        SourceKind::Node { node, .. } => {
            let n = hir.node(*node);
            // An upstream `each` with a `max:` bounds its own output list.
            let bounded_upstream = n.each.is_some_and(|i| {
                matches!(
                    n.params[i].source.kind,
                    SourceKind::Each { max: Some(_), .. }
                )
            });
            if bounded_upstream {
                return None;
            }
            match n.body {
                Body::Call { .. } => Some("that a tool returns"),
                Body::Model { .. } => Some("that a model writes"),
                _ => None,
            }
        }
        _ => None,
    }
}
