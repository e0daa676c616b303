//! The pass that reports P0505 skippable-output.

use crate::graph::source_skippable;
use crate::lint::LintContext;
use crate::ty;
use pipec_base::source::Span;
use pipec_diagnostic::rules::SKIPPABLE_OUTPUT;
use pipec_diagnostic::{Applicability, Diagnostic, Edit, Fix};
use pipec_syntax::ast::{ItemKind, TypeExprKind};

pub(crate) fn check(cx: &LintContext<'_>, out: &mut Vec<Diagnostic>) {
    let hir = cx.hir;
    for o in &hir.outputs {
        if o.declared_optional || !source_skippable(hir, &o.source) {
            continue;
        }
        let shown = ty::display(hir, o.ty.strip_optional());
        let mut d = Diagnostic::new(&SKIPPABLE_OUTPUT, o.info.file, o.value_span, format!("the output `{}` can be skipped by a `when`, and is not declared optional", o.info.name))
            .label("may be skipped")
            .help(format!("declare that a skip is expected: `output {}: {shown}? = ...` (it prints `null`), or join a fallback with `??`", o.info.name));
        if let Some(edit) = optional_edit(cx, o, &shown) {
            // `null` where a value was promised is a change of type for every reader of
            // the output: a person should agree to it.
            d = d.fix(Fix {
                title: format!("declare the output `{}?`", shown),
                applicability: Applicability::Unsafe,
                edits: vec![edit],
            });
        }
        if let Some((node, span)) = skip_cause(hir, &o.source, 0) {
            d = d.secondary(
                hir.node(node).info.file,
                span,
                format!(
                    "`{}` is skipped when this is false",
                    hir.node(node).info.name
                ),
            );
        }
        out.push(d);
    }
}

/// The edit that declares an output optional: `?` after its written type (in
/// parentheses around a union), or `: T?` after its name when it has none.
fn optional_edit(cx: &LintContext<'_>, o: &crate::hir::OutputDef, shown: &str) -> Option<Edit> {
    let file = o.info.file;
    let syntax = cx.syntax.iter().find(|s| s.file == file)?;
    let decl = syntax.ast.items.iter().find_map(|item| match &item.kind {
        ItemKind::Output(d) if d.name.span == o.info.name_span => Some(d),
        _ => None,
    })?;
    let (span, replacement) = match &decl.ty {
        Some(t) if matches!(t.kind, TypeExprKind::Union(_)) => {
            let written = cx.db.get(file).slice(t.span);
            (t.span, format!("({written})?"))
        }
        Some(t) => (Span::new(t.span.end, t.span.end), "?".to_string()),
        None => (
            Span::new(decl.name.span.end, decl.name.span.end),
            format!(": {shown}?"),
        ),
    };
    Some(Edit {
        file,
        span,
        replacement,
    })
}

/// The `when` that can skip a source: the nearest skippable node with a `when` of its own.
fn skip_cause(
    hir: &crate::hir::Hir,
    src: &crate::hir::Source,
    depth: usize,
) -> Option<(u32, pipec_base::source::Span)> {
    use crate::hir::SourceKind;
    if depth > 64 {
        return None;
    }
    match &src.kind {
        SourceKind::Node { node, .. } => {
            let n = hir.node(*node);
            if !n.skippable {
                return None;
            }
            if let (Some(w), None) = (&n.when, n.each) {
                return Some((*node, w.span));
            }
            n.params
                .iter()
                .filter(|p| p.is_each() || !p.ty.is_optional())
                .find_map(|p| skip_cause(hir, &p.source, depth + 1))
        }
        SourceKind::Join(sides) => sides.iter().find_map(|s| skip_cause(hir, s, depth + 1)),
        SourceKind::Record(fields) => fields
            .iter()
            .find_map(|(_, s)| skip_cause(hir, s, depth + 1)),
        SourceKind::List(items) => items.iter().find_map(|s| skip_cause(hir, s, depth + 1)),
        SourceKind::Each { inner, .. } => skip_cause(hir, inner, depth + 1),
        _ => None,
    }
}
