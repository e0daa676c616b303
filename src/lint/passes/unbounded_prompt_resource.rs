//! The pass that reports P0306 unbounded-prompt-resource.

use crate::check::hir::{Body, SourceKind};
use crate::diagnostic::Diagnostic;
use crate::lint::LintContext;
use crate::rules::UNBOUNDED_PROMPT_RESOURCE;
use std::collections::BTreeSet;

pub(crate) fn check(cx: &LintContext<'_>, out: &mut Vec<Diagnostic>) {
    let hir = cx.hir;
    let mut readers = BTreeSet::new();
    for node in &hir.nodes {
        let Body::Model { tools, .. } = &node.body else {
            continue;
        };
        for p in node.params.iter().filter(|p| p.fetches()) {
            let (src, per_item) = match &p.source.kind {
                SourceKind::Each { inner, .. } => (&inner.kind, true),
                other => (other, false),
            };
            let missing = match src {
                SourceKind::Resource(r) => r.max_bytes.is_none().then_some("max_bytes"),
                SourceKind::Link(l) if !l.many || per_item => {
                    l.max_bytes.is_none().then_some("max_bytes")
                }
                SourceKind::Link(l) => l.max_total.is_none().then_some("max_total"),
                _ => None,
            };
            if let Some(option) = missing {
                let what = if option == "max_total" {
                    "these resources reach"
                } else {
                    "this resource reaches"
                };
                out.push(
                    Diagnostic::new(&UNBOUNDED_PROMPT_RESOURCE, node.info.file, p.source.span, format!("{what} the model in `{}` with no size cap", node.info.name))
                        .label(format!("no `{option}`"))
                        .help(format!("cap what the prompt can receive: add `{option}: 100kb` (or a size that fits the model's context)")),
                );
            }
        }
        for t in tools {
            let tool = hir.tool(*t);
            if tool.is_reader && tool.max_bytes.is_none() {
                readers.insert(*t);
            }
        }
    }
    for t in readers {
        let tool = hir.tool(t);
        out.push(
            Diagnostic::new(
                &UNBOUNDED_PROMPT_RESOURCE,
                tool.info.file,
                tool.info.name_span,
                format!(
                    "the reader `{}` gives a model what it reads with no size cap",
                    tool.info.name
                ),
            )
            .label("no `max_bytes`")
            .help("add `max_bytes = 100kb` to the reader"),
        );
    }
}
