//! The pass that reports P0306 unbounded-prompt-resource.

use crate::hir::{Body, SourceKind};
use crate::lint::LintContext;
use crate::lint::edit::{add_setting, append_argument};
use pipec_diagnostic::rules::UNBOUNDED_PROMPT_RESOURCE;
use pipec_diagnostic::{Applicability, Diagnostic, Fix};
use pipec_syntax::ast::ItemKind;
use std::collections::BTreeSet;

pub(crate) fn check(cx: &LintContext<'_>, out: &mut Vec<Diagnostic>) {
    let hir = cx.hir;
    let mut readers = BTreeSet::new();
    for node in &hir.nodes {
        let Body::Model { tools, .. } = &node.body else {
            continue;
        };
        for p in node.params.iter().filter(|p| p.fetches()) {
            let (src, per_item, call) = match &p.source.kind {
                SourceKind::Each { inner, .. } => (&inner.kind, true, inner.span),
                other => (other, false, p.source.span),
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
                let mut d = Diagnostic::new(&UNBOUNDED_PROMPT_RESOURCE, node.info.file, p.source.span, format!("{what} the model in `{}` with no size cap", node.info.name))
                    .label(format!("no `{option}`"))
                    .help(format!("cap what the prompt can receive: add `{option}: 100kb` (or a size that fits the model's context)"));
                let arg = format!("{option}: 100kb");
                if let Some(edit) = append_argument(cx.db, node.info.file, call, &arg) {
                    // A cap is a limit the run enforces: a person should pick the size.
                    d = d.fix(Fix {
                        title: format!("add `{arg}`"),
                        applicability: Applicability::Unsafe,
                        edits: vec![edit],
                    });
                }
                out.push(d);
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
        let mut d = Diagnostic::new(
            &UNBOUNDED_PROMPT_RESOURCE,
            tool.info.file,
            tool.info.name_span,
            format!(
                "the reader `{}` gives a model what it reads with no size cap",
                tool.info.name
            ),
        )
        .label("no `max_bytes`")
        .help("add `max_bytes = 100kb` to the reader");
        let block = reader_block(cx, tool.info.file, tool.info.name_span);
        if let Some(edit) =
            block.and_then(|b| add_setting(cx.db, tool.info.file, b, "max_bytes = 100kb"))
        {
            d = d.fix(Fix {
                title: "add `max_bytes = 100kb` to the reader".to_string(),
                applicability: Applicability::Unsafe,
                edits: vec![edit],
            });
        }
        out.push(d);
    }
}

/// The span of the `{ ... }` of the reader declared with its name at `name`.
fn reader_block(
    cx: &LintContext<'_>,
    file: pipec_base::source::FileId,
    name: pipec_base::source::Span,
) -> Option<pipec_base::source::Span> {
    let syntax = cx.syntax.iter().find(|s| s.file == file)?;
    syntax.ast.items.iter().find_map(|item| match &item.kind {
        ItemKind::Reader(t) | ItemKind::Tool(t) if t.name.span == name => {
            t.body.as_ref().map(|b| b.span)
        }
        _ => None,
    })
}
