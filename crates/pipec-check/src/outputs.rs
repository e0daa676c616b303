//! Outputs: the values a finished run prints, bound like parameters (no resources, no
//! `each`).

use super::Checker;
use super::hir::*;
use super::nodes::SourceCtx;
use super::ty::Ty;
use pipec_base::source::Span;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_syntax::ast::{self, ItemKind};

impl Checker<'_> {
    pub(crate) fn check_outputs(&mut self, root: usize) {
        let file = self.files[root].id;
        let items: Vec<ast::Item> = self.files[root]
            .ast
            .items
            .iter()
            .filter(|i| matches!(i.kind, ItemKind::Output(_)))
            .cloned()
            .collect();
        let mut seen: Vec<(String, Span)> = Vec::new();
        for item in &items {
            let ItemKind::Output(o) = &item.kind else {
                continue;
            };
            if let Some((_, first)) = seen.iter().find(|(n, _)| *n == o.name.name) {
                self.diags.push(
                    Diagnostic::new(
                        &r::DUPLICATE_DECLARATION,
                        file,
                        o.name.span,
                        format!("the output `{}` is declared twice", o.name.name),
                    )
                    .label("declared again here")
                    .secondary(file, *first, "first declared here"),
                );
                continue;
            }
            seen.push((o.name.name.clone(), o.name.span));
            let declared = o.ty.as_ref().map(|t| self.resolve_type(root, t));
            let expected = declared.clone().unwrap_or(Ty::Json);
            let mut params = Vec::new();
            let mut ctx = SourceCtx {
                f: root,
                file,
                node: SourceCtx::OUTPUT,
                params: &mut params,
                current: usize::MAX,
                name: &o.name.name,
                whole: o.value.span,
            };
            let src = self.output_source(&mut ctx, &o.value, &expected);
            let ty = declared.clone().unwrap_or_else(|| src.ty.clone());
            self.hir.outputs.push(OutputDef {
                info: DeclInfo {
                    name: o.name.name.clone(),
                    display: o.name.name.clone(),
                    file,
                    span: item.span,
                    name_span: o.name.span,
                    doc: item.doc.as_ref().map(|d| d.text.clone()),
                },
                declared_optional: declared.as_ref().is_some_and(|t| t.is_optional()),
                ty,
                source: src,
                value_span: o.value.span,
            });
        }
    }

    /// Outputs take the same sources as parameters, except resources (nothing fetches
    /// for an output) and `each`, at any depth: `source` refuses them for an output.
    fn output_source(&mut self, ctx: &mut SourceCtx<'_>, e: &ast::Expr, expected: &Ty) -> Source {
        self.source(ctx, e, expected, false)
    }
}
