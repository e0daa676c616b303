//! Readers: tools that read a resource by URI, whose signature must fit their template.

use crate::Checker;
use crate::hir::*;
use crate::ty;
use pipec_base::source::FileId;
use pipec_base::uri::UriTemplate;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_syntax::ast;

pub(super) const READER_SETTINGS: &[&str] = &["uri", "max_bytes", "mime"];

impl Checker<'_> {
    pub(super) fn check_reader_signature(
        &mut self,
        file: FileId,
        decl: &ast::ToolDecl,
        params: &[ToolParam],
        t: &UriTemplate,
        lit: Option<&ast::StrLit>,
    ) {
        for v in t.variables() {
            if !params.iter().any(|p| p.name == v.name) {
                let at = lit.map_or(decl.name.span, |l| l.source_span(v.start, v.end));
                self.diags.push(
                    Diagnostic::new(
                        &r::READER_SIGNATURE_MISMATCH,
                        file,
                        at,
                        format!(
                            "the URI variable `{}` is not a parameter of the reader `{}`",
                            v.name, decl.name.name
                        ),
                    )
                    .label("no parameter for it")
                    .help(format!("add the parameter `{}: string`", v.name)),
                );
            }
        }
        for p in params {
            if !t.variables().any(|v| v.name == p.name) {
                self.diags.push(
                    Diagnostic::new(
                        &r::READER_SIGNATURE_MISMATCH,
                        file,
                        p.span,
                        format!(
                            "the parameter `{}` is not a variable of the reader's URI template",
                            p.name
                        ),
                    )
                    .label("not in the URI")
                    .help("a reader's parameters are exactly its URI template's variables"),
                );
            }
            if !ty::is_uri_scalar(&self.hir, &p.ty) {
                self.diags.push(
                    Diagnostic::new(
                        &r::TYPE_MISMATCH,
                        file,
                        p.span,
                        format!(
                            "a URI variable must be a string, number or boolean, not `{}`",
                            ty::display(&self.hir, &p.ty)
                        ),
                    )
                    .label("cannot be written into a URI"),
                );
            }
        }
    }
}
