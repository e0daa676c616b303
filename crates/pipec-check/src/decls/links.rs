//! Link kinds: the type a kind lifts to, its URI template, and kinds whose templates
//! match the same URIs (P0304).

use crate::Checker;
use crate::hir::*;
use crate::ty::Ty;
use pipec_base::source::{FileId, Span};
use pipec_base::uri::{self, UriTemplate};
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_syntax::ast;

pub(crate) fn empty_link(info: DeclInfo, kind: String) -> LinkDef {
    LinkDef {
        info,
        kind,
        ty: Ty::Error,
        template: UriTemplate {
            text: String::new(),
            parts: Vec::new(),
        },
        matchable: false,
    }
}

impl Checker<'_> {
    pub(super) fn check_link(&mut self, f: usize, id: LinkId, decl: &ast::LinkDecl) {
        let file = self.files[f].id;
        let ty = self.resolve_type(f, &decl.ty);
        let template = self.uri_template_at(
            file,
            &decl.template.value,
            decl.template.span,
            Some(&decl.template),
        );
        let mut matchable = false;
        if let Some(t) = &template {
            match t.check_matchable() {
                Ok(()) => matchable = true,
                Err(problem) => {
                    self.diags.push(
                        Diagnostic::new(
                            &r::INVALID_URI_TEMPLATE,
                            file,
                            decl.template.source_span(problem.start, problem.end),
                            format!(
                                "the template of link kind \"{}\" cannot be matched: {}",
                                decl.kind.value,
                                problem.message()
                            ),
                        )
                        .label("cannot be matched")
                        .help(problem.help()),
                    );
                }
            }
        }
        let link = &mut self.hir.links[id as usize];
        link.ty = ty;
        link.matchable = matchable;
        if let Some(t) = template {
            link.template = t;
        }
    }

    /// Parses a URI template, reporting P0302 at the string (or at the offending byte).
    pub(crate) fn uri_template_at(
        &mut self,
        file: FileId,
        text: &str,
        span: Span,
        lit: Option<&ast::StrLit>,
    ) -> Option<UriTemplate> {
        match uri::parse(text) {
            Ok(t) => Some(t),
            Err(e) => {
                let at = match (e.offset, lit) {
                    (Some(o), Some(l)) => {
                        let o = pipec_base::source::floor_char_boundary(text, o);
                        let end = o + text[o..].chars().next().map_or(0, char::len_utf8);
                        l.source_span(o, end)
                    }
                    _ => span,
                };
                self.diags.push(
                    Diagnostic::new(&r::INVALID_URI_TEMPLATE, file, at, format!("invalid URI template: {}", e.message))
                        .label("here")
                        .help("URI templates follow RFC 6570: `mcp://crm/deals/{deal_id}`, `file:///docs/{+path}`"),
                );
                None
            }
        }
    }

    /// Two link kinds whose templates recognise the same URI make lifting ambiguous.
    pub(super) fn check_link_overlaps(&mut self) {
        let n = self.hir.links.len();
        for a in 0..n {
            for b in a + 1..n {
                let (la, lb) = (&self.hir.links[a], &self.hir.links[b]);
                if !la.matchable
                    || !lb.matchable
                    || !self.hir.is_root_file(la.info.file) && !self.hir.is_root_file(lb.info.file)
                {
                    continue;
                }
                let overlap = ["x", "x/y"].iter().any(|v| {
                    lb.template.match_uri(&la.template.sample(v)).is_some()
                        || la.template.match_uri(&lb.template.sample(v)).is_some()
                });
                if overlap {
                    let (file, span) = (lb.info.file, lb.info.name_span);
                    let (ofile, ospan) = (la.info.file, la.info.name_span);
                    let msg = format!(
                        "the link kinds \"{}\" and \"{}\" match the same URIs",
                        la.kind, lb.kind
                    );
                    self.diags.push(
                        Diagnostic::new(&r::OVERLAPPING_LINK_TEMPLATES, file, span, msg)
                            .label("overlaps")
                            .secondary(ofile, ospan, "with this kind")
                            .help("make the templates differ in their literal text, so every link has one kind"),
                    );
                }
            }
        }
    }
}
